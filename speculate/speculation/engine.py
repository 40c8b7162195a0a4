"""The speculation engine: after each turn, suggest the next prompt and run it on an overlay.

One *cycle* per completed main turn runs in the session's nursery under its own cancel scope:
suggestion (or a pipelined one) → fork on a fresh overlay → stop at complete or a boundary → (complete)
pipelined next suggestion. ``accept`` promotes and injects; ``ignore`` cancels the cycle and discards the
overlay. Nothing but ``accept`` writes the real tree. See docs/speculation.md for the state machine.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from speculate.agent import Agent
from speculate.agent_types import (
    AgentEvent,
    BoundaryReached,
    MaxTurnsReached,
    ResponseDone,
    ToolFinished,
    ToolStarted,
)
from speculate.hooks import HookRan, PromptBlocked
from speculate.instructions import is_instructions_path
from speculate.models.base import ModelError, Usage
from speculate.models.billing import Meter, billed_to
from speculate.speculation import suggest
from speculate.speculation.authorize import SpecAuthorizer
from speculate.speculation.events import (
    Boundary,
    SpecEvent,
    SpecOutcome,
    SpeculationRecord,
    State,
    SuggestionOutcome,
    SuggestionRecord,
)
from speculate.speculation.host import Host, IgnoreReason
from speculate.speculation.trim import completed_part
from speculate.tools.base import ToolContext
from speculate.types import Message, text_of

if TYPE_CHECKING:
    from speculate.session import TurnOutcome


def cost_usd(model: str, usage: Usage) -> float:
    from speculate.models.profiles import find_profile

    p = find_profile(model)
    return p.cost_usd(usage.as_dict()) if p else 0.0


class Speculation:
    """One fork: its overlay, agent, timings and outcome."""

    def __init__(self, *, suggestion: str, prefix_len: int, turn: int, pipelined: bool) -> None:
        self.suggestion = suggestion
        self.prefix_len = prefix_len
        self.started = time.perf_counter()
        self.finished = trio.Event()  # the fork stopped: complete, boundary or error
        self.finished_at: float | None = None
        self.next_ready = trio.Event()  # the pipelined suggestion is known (or will not come)
        self.next: suggest.SuggestionOutcome | None = None
        self.overlay: Any = None
        self.agent: Agent | None = None
        self.usage = Usage()
        # Requests cut mid-stream (the fork thrown away, its pipelined suggestion abandoned): what the API bills.
        self.meter, self.next_meter = Meter(), Meter()
        self.last_usage: Usage | None = None  # of its last response: the context size after it (compaction)
        self.tools_run = 0
        # What the fork showed so far (text, tool lines), replayed on acceptance; then ``live`` (the
        # session's event callback) hears the rest as it happens, as a normal turn streams.
        self.shown: list[AgentEvent] = []
        self.live: Callable[[AgentEvent], None] | None = None
        self.diverged_at_tokens: int | None = None  # the fork's tokens when the user first typed off its prompt
        self.record = SpeculationRecord(turn=turn, suggestion=suggestion, pipelined=pipelined)

    @property
    def complete(self) -> bool:
        return self.record.boundary == "complete"

    def stop(self, boundary: Boundary, detail: str = "") -> None:
        self.record.boundary, self.record.boundary_detail = boundary, detail


class SpeculationEngine:
    def __init__(self, *, session: Host, nursery: trio.Nursery) -> None:
        self.s = session
        self.nursery = nursery
        self.suggestion: str | None = None
        self._suggestion_ready = trio.Event()
        self._suggestion_ready.set()
        self._sugg_rec: SuggestionRecord | None = None
        self._sugg_shown_at = 0.0
        self._spec: Speculation | None = None
        self._scope: trio.CancelScope | None = None
        self._cycle_done = trio.Event()
        self._cycle_done.set()
        self._pipelined_from: Speculation | None = None
        self.state: State = "idle"
        self.bash_line = ""  # how speculative Bash runs here (or why it does not), set by the first fork

    # -- driven by the session -----------------------------------------------------------------------
    def after_turn(self, *, pipelined: bool) -> None:
        """Start the next cycle (the previous one is over: accepted or ignored)."""
        self.suggestion = None
        self._suggestion_ready = trio.Event()
        self._cycle_done = trio.Event()
        source = self._pipelined_from if pipelined else None
        self._pipelined_from = None
        snapshot = copy.deepcopy(self.s.messages)
        scope = self._scope = trio.CancelScope()
        self.nursery.start_soon(self._cycle, scope, snapshot, self.s.turn, source)

    async def wait_suggestion(self) -> str | None:
        await self._suggestion_ready.wait()
        return self.suggestion

    async def wait_finished(self) -> None:
        await self._suggestion_ready.wait()
        if self._spec is not None:
            await self._spec.finished.wait()

    def diff(self) -> str:
        spec = self._spec
        return spec.overlay.diff() if spec is not None and spec.overlay is not None else ""

    async def ignore(self, reason: IgnoreReason = "typed") -> None:
        """The user typed something else (or left): drop the suggestion, abort and discard the fork."""
        t0 = time.perf_counter()
        if self._sugg_rec is not None:
            self._decide_suggestion("ignored")
        spec, self._spec = self._spec, None
        await self._cancel_cycle()
        if spec is not None:
            self._close(spec, "aborted", reason, abort_started=t0)
            self._emit("aborted", spec.suggestion)
        self.suggestion = None

    def diverged(self) -> None:
        """The user typed off the suggestion but it is kept (it may still be accepted): note the fork's
        tokens now, so what it spends from here on is recorded as the cost of keeping it."""
        spec = self._spec
        if spec is not None and spec.diverged_at_tokens is None:
            spec.diverged_at_tokens = sum(spec.usage.as_dict().values())

    async def shutdown(self) -> None:
        await self.ignore("shutdown")

    async def accept(self, prompt: str, t0: float) -> TurnOutcome:
        """Use the speculation for ``prompt`` (the current suggestion)."""
        from speculate.session import TurnOutcome

        self._decide_suggestion("accepted")
        spec = self._spec
        if spec is None or spec.overlay is None:  # no fork (e.g. it failed to start): a normal turn
            await self.ignore("no_speculation")
            return await self.s.run_turn(prompt, t0)
        for e in spec.shown:  # what the fork already did, then the rest live
            self.s.on_event(e)
        spec.live = self.s.on_event
        if not spec.finished.is_set():
            if self.s.cfg.accept_running == "wait":
                await spec.finished.wait()  # the fork goes on under speculation rules; the user waits less
            else:
                await self._cancel_cycle()
                if not spec.record.boundary:
                    spec.stop("interrupted")
        spec.live = None
        rec = spec.record
        rec.time_to_accept_s = t0 - spec.started
        finished_at = spec.finished_at if spec.finished_at is not None else time.perf_counter()
        rec.time_saved_s = max(0.0, min(t0, finished_at) - spec.started)
        tp = time.perf_counter()
        try:
            result = spec.overlay.promote()
        except OSError as e:  # rolled back (disk full, no permission), or another session held the lock
            result, note = None, f"speculation discarded: accepting it failed ({e}); running normally"
        rec.promote_s = time.perf_counter() - tp
        if result is None or result.conflicts:
            if result is not None:
                note = ("speculation discarded: the real tree changed under it ("
                        + ", ".join(str(getattr(c, "path", c)) for c in result.conflicts) + "); running normally")
            self._spec = None
            await self._cancel_cycle()  # incl. a pipelined suggestion built on the discarded fork
            self._close(spec, "conflict" if result is not None else "error", note, saved=False)
            return await self.s.run_turn(prompt, t0, note=note)
        assert spec.agent is not None
        assert len(self.s.messages) == spec.prefix_len, "main conversation moved under the speculation"
        injected = completed_part(spec.agent.messages[spec.prefix_len:], complete=spec.complete)
        self.s.messages.extend(injected)
        rec.files_written = [str(getattr(p, "path", p)) for p in result.promoted
                             if getattr(p, "type", "file") != "dir"]  # files (and links), not directories
        self._spec = None
        self._close(spec, "accepted", "")
        self._emit("accepted", spec.suggestion, time_saved_s=rec.time_saved_s)
        if spec.complete:
            self._pipelined_from = spec
            self.s._last_usage = spec.last_usage or self.s._last_usage
            last = self.s.messages[-1]
            return TurnOutcome(prompt, text_of(last) if last["role"] == "assistant" else "",
                               time.perf_counter() - t0, True, None, rec)
        await self._cancel_cycle()
        return await self.s.run_turn(prompt, t0, resume=True, spec=rec)

    # -- the cycle ----------------------------------------------------------------------------------
    async def _cycle(self, scope: trio.CancelScope, snapshot: list[Message], turn: int,
                     source: Speculation | None) -> None:
        # Captured: after an accept, the next cycle replaces these while this one may still be finishing
        # the pipelined suggestion.
        done, ready = self._cycle_done, self._suggestion_ready
        try:
            with scope:
                text = await (self._pipelined(source) if source is not None else self._suggest(snapshot, turn))
                if text is None:
                    return
                self.suggestion = text
                self._sugg_shown_at = time.perf_counter()
                ready.set()
                if self.s.cfg.fork:  # without a fork, accepting the suggestion runs a normal turn
                    await self._speculate(snapshot, text, turn, pipelined=source is not None)
        finally:
            ready.set()
            done.set()
            if self._spec is None and self._cycle_done is done and self.state not in ("accepted", "aborted"):
                self._emit("idle", None)

    async def _pipelined(self, source: Speculation) -> str | None:
        await source.next_ready.wait()
        out = source.next
        return None if out is None else self._offer(out, self.s.turn, pipelined=True)

    async def _suggest(self, snapshot: list[Message], turn: int) -> str | None:
        last = self.s.agent_last_usage()
        reason = suggest.suppression_reason(snapshot, mode=self.s.cfg.mode, last_error=self.s.last_error,
                                            pending_ask=self.s.authorizer.pending_ask, last_usage=last,
                                            near_limit=self.s.near_context_limit())
        if reason:
            self.s.events.write(SuggestionRecord(turn=turn, outcome="suppressed", reason=reason))
            return None
        self._emit("generating", None)
        meter = Meter()
        try:
            with billed_to(meter):
                out = await suggest.generate(self.s.cfg.model, self.s.key, snapshot)
        except trio.Cancelled:
            self._cancelled_suggestion(meter, turn, pipelined=False)
            raise
        except ModelError as e:
            self.s.events.write(SuggestionRecord(turn=turn, outcome="suppressed", reason=f"error: {e}"))
            return None
        return self._offer(out, turn, pipelined=False)

    def _offer(self, out: suggest.SuggestionOutcome, turn: int, *, pipelined: bool) -> str | None:
        """Show a generated suggestion (its record waits for the user's decision), or record it filtered."""
        rec = self._suggestion_record(out, turn, pipelined=pipelined)
        if out.text is None:
            rec.outcome, rec.reason = "filtered", out.reason
            self.s.events.write(rec)
            return None
        self._sugg_rec = rec
        return out.text

    def _suggestion_record(self, out: suggest.SuggestionOutcome, turn: int, *, pipelined: bool
                           ) -> SuggestionRecord:
        return SuggestionRecord(turn=turn, text=out.text or "", generation_s=out.duration_s,
                                pipelined=pipelined, tokens=out.usage.as_dict(),
                                cost_usd=cost_usd(self.s.cfg.model_name, out.usage))

    async def _speculate(self, snapshot: list[Message], text: str, turn: int, *, pipelined: bool) -> None:
        from overlayfs import Overlay

        spec = self._spec = Speculation(suggestion=text, prefix_len=len(snapshot), turn=turn,
                                        pipelined=pipelined)
        t = time.perf_counter()
        spec.overlay = Overlay(lower=self.s.project)
        spec.record.overlay_create_s = time.perf_counter() - t
        shell, sandboxed, backend = self._shell_for(spec.overlay)
        spec.record.overlay_backend = backend
        spec.record.bash = self.bash_line
        # The user's hooks are untrusted code with side effects, as Bash is: in the sandbox against the
        # overlay, or (no sandbox) a boundary wherever one would run.
        hooks = self.s.workspace.hooks(
            shell=shell, session_id=self.s.session_id, mode=lambda: self.s.cfg.mode, sandboxed=sandboxed,
            boundary=None if sandboxed else f"hooks run in a speculation only in its sandbox: {self.bash_line}",
            on_event=lambda r: self._fork_hook(spec, r))
        authorizer = SpecAuthorizer(mode=self.s.cfg.mode, allow=self.s.authorizer.allow,
                                    deny=self.s.authorizer.deny, ask_rules=self.s.authorizer.ask_rules,
                                    sandboxed_bash=sandboxed, root=self.s.project, bash_off=self.bash_line,
                                    hook_stop=hooks.stops_call)
        spec.agent = Agent(model=self.s.cfg.model, key=self.s.key, tools=self.s.tools,
                           ctx=ToolContext(fs=spec.overlay, shell=shell, spill_dir=self.s.spill_dir),
                           authorizer=authorizer, messages=copy.deepcopy(snapshot),
                           max_turns=self.s.cfg.spec_max_turns, max_messages=self.s.cfg.spec_max_messages,
                           on_event=lambda e: self._fork_event(spec, e), repair_on_interrupt=False, hooks=hooks)
        spec.record.fork_start_s = time.perf_counter() - spec.started
        self._emit("speculating", text, tools_run=0, elapsed_s=0.0)
        try:
            with billed_to(spec.meter):
                await spec.agent.run(text)
            spec.stop("complete")
        except BoundaryReached as b:
            spec.stop(b.kind, b.detail)
            # Over its bounds, or holding a write that made the boundary (an instructions file written by a
            # command): nothing of it may be promoted; the disk is freed at once.
            if b.kind == "resource" or b.discard:
                spec.overlay.discard()
                spec.overlay = None
        except PromptBlocked as e:  # as in the main loop, the prompt is refused; accepting runs it normally
            spec.stop("hook", f"UserPromptSubmit hook refused it: {e}")
        except MaxTurnsReached as e:
            spec.stop(e.kind, str(e))
        except ModelError as e:
            spec.stop("error", str(e))
        if spec.overlay is not None and len(spec.agent.messages) == spec.prefix_len:
            spec.overlay.discard()  # stopped before its prompt was added: nothing to promote or inject
            spec.overlay = None
        spec.finished_at = time.perf_counter()
        spec.record.completed = True
        spec.finished.set()
        if spec.complete:
            self._emit("ready", text, tools_run=spec.tools_run, elapsed_s=spec.finished_at - spec.started)
            try:
                with billed_to(spec.next_meter):
                    spec.next = await suggest.generate(self.s.cfg.model, spec.agent.key, spec.agent.messages)
            except ModelError:
                spec.next = None
            finally:
                spec.next_ready.set()
        else:
            spec.next_ready.set()
            self._emit("boundary", text, boundary=spec.record.boundary, detail=spec.record.boundary_detail,
                       tools_run=spec.tools_run, elapsed_s=spec.finished_at - spec.started)

    # -- helpers ------------------------------------------------------------------------------------
    def _shell_for(self, overlay: Any) -> tuple[Any, bool, str]:
        from speculate.speculation.sandbox_shell import NoShell, SandboxShell, bash_sandbox

        box = bash_sandbox(self.s.cfg.overlay_backend)
        self.bash_line = box.line
        if box.backend is None:
            return NoShell(box.line), False, "pure"
        shell = SandboxShell(overlay, box.backend, limits=self.s.cfg.sandbox_limits, protected=is_instructions_path,
                             env=self.s.cfg.tool_env)
        return shell, True, box.backend

    def _fork_hook(self, spec: Speculation, r: HookRan) -> None:
        spec.record.hooks_run += 1
        if r.blocked and r.event == "PreToolUse":
            spec.record.hook_denials.append(f"{r.tool}: {r.stderr.strip() or r.command}")

    def _fork_event(self, spec: Speculation, e: AgentEvent) -> None:
        if not isinstance(e, ToolStarted):
            spec.shown.append(e)
            if spec.live is not None:
                spec.live(e)
        if isinstance(e, ResponseDone):
            spec.usage = spec.usage.add(e.response.usage)
            spec.last_usage = e.response.usage
        elif isinstance(e, ToolFinished):
            spec.tools_run += 1
            self._emit("speculating", spec.suggestion, tools_run=spec.tools_run,
                       elapsed_s=time.perf_counter() - spec.started)

    async def _cancel_cycle(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
        await self._cycle_done.wait()

    def _decide_suggestion(self, outcome: SuggestionOutcome) -> None:
        rec, self._sugg_rec = self._sugg_rec, None
        if rec is None:
            return
        rec.outcome = outcome
        rec.time_to_decision_s = time.perf_counter() - self._sugg_shown_at
        self.s.events.write(rec)

    def _close(self, spec: Speculation, outcome: SpecOutcome, reason: str, *, saved: bool = True,
               abort_started: float | None = None) -> None:
        rec = spec.record
        rec.outcome, rec.reason = outcome, reason
        end = spec.finished_at if spec.finished_at is not None else time.perf_counter()
        rec.duration_s = end - spec.started
        rec.tools_run = spec.tools_run
        usage = spec.usage.add(spec.meter.usage)  # a request cut mid-stream is billed too
        rec.tokens = usage.as_dict()
        if spec.diverged_at_tokens is not None:
            rec.tokens_after_divergence = sum(rec.tokens.values()) - spec.diverged_at_tokens
        rec.cost_usd = cost_usd(self.s.cfg.model_name, usage)
        if outcome != "accepted" or not saved:
            rec.time_saved_s = 0.0
        if spec.overlay is not None:
            spec.overlay.discard()  # aborted, or promoted (the upper layer is spent)
        if abort_started is not None:
            rec.abort_s = time.perf_counter() - abort_started
        self.s.events.write(rec)
        if outcome != "accepted" and spec.next is not None:
            # The pipelined suggestion made on this fork's messages dies with it: count it as waste.
            dead = self._suggestion_record(spec.next, rec.turn, pipelined=True)
            dead.outcome, dead.reason = "discarded", f"speculation {outcome}"
            self.s.events.write(dead)
        elif spec.next is None:  # its pipelined suggestion was cut mid-request: billed all the same
            self._cancelled_suggestion(spec.next_meter, rec.turn, pipelined=True)

    def _cancelled_suggestion(self, meter: Meter, turn: int, *, pipelined: bool) -> None:
        """A suggestion request cut mid-stream: recorded as discarded, with what the API bills for it."""
        if meter.cancelled:
            self.s.events.write(SuggestionRecord(
                turn=turn, outcome="discarded", reason="cancelled mid-request", pipelined=pipelined,
                tokens=meter.usage.as_dict(), cost_usd=cost_usd(self.s.cfg.model_name, meter.usage)))

    def _emit(self, state: State, suggestion: str | None, **detail: Any) -> None:
        self.state = state
        self.s.on_event(SpecEvent(state, suggestion, detail))
