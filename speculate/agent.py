"""The agent loop: ``run`` → ``step`` → ``query`` → ``execute``, on one screen.

Control flow uses small exceptions (:mod:`speculate.agent_types`): :class:`ToolDenied` becomes an
``is_error`` result, :class:`BoundaryReached` (a speculative fork must stop before this call) propagates out
of ``run``, and so does :class:`MaxTurnsReached`. Tool failures go back to the model; our own bugs
propagate. The user's hooks (:class:`Hooks`, :mod:`speculate.hooks`) run on the prompt, before each call's
permission check (their decision feeds it, as in Claude Code), after it, and when the turn would end; what
they say for the model goes in a ``<system-reminder>`` block after the prompt or the tool results, and a
hook's ``continue: false`` ends the turn (``TurnResult.hook_stopped``).

One call's authorization and running are :mod:`speculate.agent_calls`' part of the class.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import aclosing, contextmanager

import trio

from speculate.agent_calls import AgentCalls
from speculate.agent_types import (
    AgentEvent,
    Authorizer,
    BoundaryKind,
    BoundaryReached,
    Hooks,
    MaxTurnsReached,
    ResponseDone,
    ToolDenied,
    ToolFinished,
    ToolStarted,
    TurnResult,
    summarize,
)
from speculate.hooks.events import NO_RESPONSE, prompt_stopped, reminder, stop_feedback
from speculate.instruction_nested import nested_for_calls
from speculate.models.base import BlockDone, CacheKey, Done, Model, ModelResponse, TextDelta
from speculate.tools.base import Tool, ToolContext
from speculate.tools.budget import MESSAGE_RESULT_BUDGET, fit_results
from speculate.types import Block, Message, text, text_of, tool_result, tool_uses, user

# The loop's vocabulary stays importable from here, as it was before agent_types.py.
__all__ = [
    "INTERRUPTED",
    "MAX_TOKENS_CONTINUE",
    "Agent",
    "AgentEvent",
    "Authorizer",
    "BoundaryKind",
    "BoundaryReached",
    "Hooks",
    "MaxTurnsReached",
    "ResponseDone",
    "ToolDenied",
    "ToolFinished",
    "ToolStarted",
    "TurnResult",
    "summarize",
]

INTERRUPTED = "Interrupted: the user cancelled this tool call before it finished."
MAX_TOKENS_CONTINUE = (
    "Your response was cut off by the output token limit. Continue exactly where you stopped."
)


@contextmanager
def _bare_boundary() -> Iterator[None]:
    """A boundary raised inside a batch's nursery comes out as itself, not wrapped in an ExceptionGroup."""
    try:
        yield
    except BaseExceptionGroup as eg:
        match, rest = eg.split(BoundaryReached)
        if match is None or rest is not None:
            raise
        first: BaseException = match
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


class Agent(AgentCalls):
    def __init__(
        self,
        *,
        model: Model,
        key: CacheKey,
        tools: Sequence[Tool],
        ctx: ToolContext,
        authorizer: Authorizer,
        messages: list[Message] | None = None,
        max_turns: int = 50,
        max_messages: int | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
        repair_on_interrupt: bool = True,
        hooks: Hooks | None = None,
        result_budget: int = MESSAGE_RESULT_BUDGET,
    ) -> None:
        self.model, self.key, self.ctx, self.authorizer = model, key, ctx, authorizer
        gate = getattr(authorizer, "gate", None)  # both of ours have one (speculate.speculation.authorize)
        if ctx.hidden is None and gate is not None:  # what Read deny rules cover stays out of Glob and Grep
            self.ctx = dataclasses.replace(ctx, hidden=gate.hides)
        self.tools = {t.name: t for t in tools}
        self.messages: list[Message] = messages if messages is not None else []
        self.max_turns, self.max_messages = max_turns, max_messages
        self.on_event = on_event or (lambda e: None)
        self.repair_on_interrupt = repair_on_interrupt
        self.hooks = hooks
        if hooks is not None:
            hooks.attach(self.messages)  # the transcript a hook reads (transcript_path) is this conversation
        self._inputs: dict[str, Block] = {}  # a call's input as a PreToolUse hook changed it (updatedInput)
        self._notes: dict[str, list[str]] = {}  # per call: what its hooks said for the model
        self._stop: str | None = None  # a hook said continue: false in this step
        self.result_budget = result_budget  # characters of tool results per message (tools/budget.py)

    # -- the loop -------------------------------------------------------------------------------------
    async def run(self, prompt: str) -> TurnResult:
        """Add the user's prompt and run until a response has no tool calls."""
        pre = await self.hooks.prompt(prompt) if self.hooks is not None else None
        blocks = [prompt, *([reminder(pre.context)] if pre is not None and pre.context else [])]
        if pre is not None and pre.stop is not None:
            blocks.append(prompt_stopped(pre.stop))
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "user":
            last["content"] += user(*blocks)["content"]  # after an interrupted turn
        else:
            self.messages.append(user(*blocks))
        if pre is not None and pre.stop is not None:  # continue: false: no request, as Claude Code records it
            self.messages.append({"role": "assistant", "content": [text(NO_RESPONSE)]})
            result = TurnResult(stop="hook", hook_stopped=pre.stop)
            result.finished = time.perf_counter()
            return result
        return await self.resume()

    async def resume(self) -> TurnResult:
        """Run the loop from the current messages (e.g. after injected speculative messages)."""
        result = TurnResult()
        try:
            turns = 0
            while True:
                if turns >= self.max_turns:
                    raise MaxTurnsReached("max_turns", self.max_turns)
                if self.max_messages is not None and len(self.messages) >= self.max_messages:
                    raise MaxTurnsReached("max_messages", self.max_messages)
                turns += 1
                if await self.step(result):
                    break
        except BaseException:
            if self.repair_on_interrupt:
                self.repair()
            raise
        finally:
            result.finished = time.perf_counter()
        return result

    async def step(self, result: TurnResult) -> bool:
        """One request and its tool calls. True when the turn is over."""
        # The nursery holds only calls started early while streaming. An exception from the body (a
        # boundary, a model error) is re-raised bare after the nursery closes, not as an ExceptionGroup.
        failure: Exception | None = None
        finished = False
        with _bare_boundary():  # an early-started call may itself stop the fork
            async with trio.open_nursery() as nursery:
                try:
                    finished = await self._step(nursery, result)
                except Exception as e:
                    failure = e
                    nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return finished

    async def _step(self, nursery: trio.Nursery, result: TurnResult) -> bool:
        early: dict[str, trio.Event] = {}
        done: dict[str, Block] = {}
        resp = await self.query(nursery, early, done)
        result.responses.append(resp)
        self.messages.append(resp.message)
        uses = tool_uses(resp.message)
        if resp.stop_reason == "pause_turn":
            return False
        if not uses:
            result.text, result.stop = text_of(resp.message), resp.stop_reason or "end_turn"
            if resp.stop_reason == "max_tokens" and len(result.responses) < 4:
                self.messages.append(user(MAX_TOKENS_CONTINUE))
                return False
            return await self._stop_hooks(result)
        results = await self.execute(uses, early, done, result)
        # A subdirectory's CLAUDE.md or a path-scoped rule, the first time a file it covers is read or written:
        # after the results, as Claude Code sends it (the system prompt, and so the cache key, stay as they were).
        nested = nested_for_calls(self.ctx.fs, uses, results, self.messages)
        notes = [n for b in uses for n in self._notes.get(b["id"], [])] + ([self._stop] if self._stop else [])
        self.messages.append(
            user(
                *fit_results(results, self.ctx, budget=self.result_budget),
                *nested,
                *([reminder(notes)] if notes else []),
            )
        )
        result.hook_stopped = self._stop or ""
        return self._stop is not None

    async def _stop_hooks(self, result: TurnResult) -> bool:
        """The Stop hooks, when the turn would end: True if it ends, False if it goes on with their feedback."""
        if self.hooks is None:
            return True
        out = await self.hooks.stop(result.stop_hooks_blocked > 0, result.text)
        if out.stop is not None:  # continue: false: the turn ends, and the next request sees why
            said = [stop_feedback(out.feedback)] if out.feedback else []
            self.messages.append(user(*said, reminder([f"Stop hook stopped continuation: {out.stop}"])))
            self.messages.append({"role": "assistant", "content": [text(NO_RESPONSE)]})
            result.hook_stopped = out.stop
            return True
        if out.feedback is None:
            return True
        result.stop_hooks_blocked += 1
        self.messages.append(user(stop_feedback(out.feedback)))
        return False

    async def query(
        self, nursery: trio.Nursery, early: dict[str, trio.Event], done: dict[str, Block]
    ) -> ModelResponse:
        """Stream one response; start a read-only call as soon as its block is complete."""
        all_safe_so_far = True
        async with aclosing(self.model.stream(self.key, self.messages)) as stream:
            async for update in stream:
                if isinstance(update, TextDelta):
                    self.on_event(update)
                elif isinstance(update, BlockDone) and update.block.get("type") == "tool_use":
                    if all_safe_so_far and self._can_start_early(update.block):
                        ev = early[update.block["id"]] = trio.Event()
                        nursery.start_soon(self._run_one_into, update.block, done, ev)
                    else:
                        all_safe_so_far = False
                elif isinstance(update, Done):
                    self.on_event(ResponseDone(update.response))
                    return update.response
        raise RuntimeError("model stream ended without a response")

    async def execute(
        self, uses: list[Block], early: dict[str, trio.Event], done: dict[str, Block], result: TurnResult
    ) -> list[Block]:
        """Run the calls: consecutive concurrency-safe calls in parallel, others serially, in call order."""
        self._pending = done
        self._inputs, self._notes, self._stop = {}, {}, None
        try:
            i = 0
            while i < len(uses):
                batch = [uses[i]]
                if self._safe(uses[i]):
                    while i + len(batch) < len(uses) and self._safe(uses[i + len(batch)]):
                        batch.append(uses[i + len(batch)])
                for b in batch:  # authorise in call order, before any of the batch runs
                    if b["id"] not in early:
                        await self._authorize(b, done)
                with _bare_boundary():
                    async with trio.open_nursery() as n:
                        for b in batch:
                            if b["id"] in early:
                                n.start_soon(early[b["id"]].wait)
                            elif b["id"] not in done:
                                n.start_soon(self._run_one_into, b, done, None)
                i += len(batch)
        except BoundaryReached:
            # Keep the results of the calls before the boundary; the engine trims the rest.
            for b in uses:
                if b["id"] in done:
                    result.written.extend(done[b["id"]].pop("_written", ()))
            self.messages.append(user(*[done[b["id"]] for b in uses if b["id"] in done]))
            raise
        finally:
            self._pending = None
        result.tools_run += len(uses)
        for b in uses:
            result.written.extend(done[b["id"]].pop("_written", ()))
        return [done[b["id"]] for b in uses]

    # -- helpers --------------------------------------------------------------------------------------
    _pending: dict[str, Block] | None = None

    def repair(self) -> None:
        """Make the conversation valid after an interruption: every tool_use gets a tool_result."""
        if not self.messages or self.messages[-1]["role"] != "assistant":
            return
        uses = tool_uses(self.messages[-1])
        if not uses:
            return
        done = self._pending or {}
        blocks = []
        for b in uses:
            r = done.get(b["id"]) or tool_result(b["id"], INTERRUPTED, is_error=True)
            r.pop("_written", None)
            blocks.append(r)
        self.messages.append(user(*blocks))
