"""Running the settings' hooks for one agent (the main loop's, or a speculative fork's), event by event.

The hooks that match an event run in parallel, each distinct command once (as Claude Code does); their
results are read in settings order. In a fork they run one after another: an overlay takes one sandboxed
command at a time. Exit 2 refuses (stderr is the reason); any other exit, or a timeout, is
a warning in the main loop and the JSON the hook printed still counts (as Claude Code 2.1.332 does); in a
fork it stops the fork (below). :mod:`speculate.hooks.output` reads the JSON, :mod:`speculate.hooks.events`
says what reaches the model.

Where a hook runs is the runner's ``shell``: the main loop's runs on the real tree; a fork's runs in the
speculation sandbox against its overlay, and where there is no sandbox ``boundary`` says why, and a hook that
would run stops the fork instead (:class:`speculate.agent_types.BoundaryReached` ``hook``). In a fork hooks
fail closed: a hook that times out or exits with anything but 0 or 2, prints JSON that does not validate
(or stdout that starts like JSON and is not), disagrees with another hook about ``updatedInput``, or says
``continue: false`` stops the fork at a ``hook`` boundary, and its overlay is discarded.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import trio

from speculate import FileSystem, ShellResult
from speculate.agent_types import BoundaryReached
from speculate.hooks.events import (
    CompactBlocked,
    HookRan,
    PostOutcome,
    PreToolOutcome,
    PromptBlocked,
    PromptOutcome,
    StopOutcome,
    error_prefix,
)
from speculate.hooks.output import parse_output
from speculate.hooks.payloads import common_fields, file_text, hook_env, tool_response
from speculate.hooks.transcript import HookTranscript
from speculate.settings import EVENTS, MATCHED_EVENTS, Hook
from speculate.tools import registry
from speculate.tools.budget import HOOK_OUTPUT_BUDGET, cut
from speculate.types import Block, Message, text_of_result

RANK: dict[str, int] = {"deny": 3, "ask": 2, "allow": 1}  # deny > ask > allow across the matching hooks


class HookShell(Protocol):
    async def run(
        self, command: str, *, timeout: float, stdin: bytes | None = None, env: dict[str, str] | None = None
    ) -> ShellResult: ...


class HookRunner:
    """The user's hooks around one agent's turns: the methods below are the events."""

    def __init__(
        self,
        hooks: Sequence[Hook],
        *,
        shell: HookShell,
        project: Path,
        session_id: str,
        mode: Callable[[], str],
        transcript: HookTranscript | None = None,
        sandboxed: bool = False,
        boundary: str | None = None,
        on_event: Callable[[HookRan], None] | None = None,
    ) -> None:
        self.hooks = tuple(hooks)
        self.shell, self.project, self.session_id = shell, project, session_id
        self.mode, self.transcript = mode, transcript
        self.sandboxed = sandboxed
        self.boundary = boundary  # set: no sandbox for this fork, so a hook that would run stops it
        self.on_event = on_event or (lambda e: None)
        self.prompt_id: str | None = None  # the current prompt's, as Claude Code numbers them
        self.pending: list[str] = []  # SessionStart context, for the next prompt
        self.messages: list[Message] | None = None  # the conversation, for the transcript

    def attach(self, messages: list[Message]) -> None:
        """The conversation the transcript shows (the agent's)."""
        self.messages = messages

    @property
    def transcript_path(self) -> str:
        return str(self.transcript.path) if self.transcript is not None else ""

    def matching(self, event: str, target: str | None = None) -> list[Hook]:
        out: list[Hook] = []
        for h in self.hooks:
            if h.event == event and h.matches(target) and all(h.command != o.command for o in out):
                out.append(h)
        return out

    def would_run(self, event: str, target: str | None = None) -> bool:
        return bool(self.matching(event, target))

    def stops_call(self, tool: str) -> str | None:
        """In a fork without a sandbox: why a call to ``tool`` must not start (a hook would run around it)."""
        if self.boundary is None:
            return None
        hooks = [
            h for e in ("PreToolUse", "PostToolUse", "PostToolUseFailure") for h in self.matching(e, tool)
        ]
        return f"{hooks[0].event} hook `{hooks[0].command}` on {tool}: {self.boundary}" if hooks else None

    def listing(self) -> str:
        """What ``/hooks`` shows: every loaded hook by event, with its matcher, timeout and file."""
        if not self.hooks:
            return "no hooks (.claude/settings.json, .claude/settings.local.json, ~/.claude/settings.json)"
        lines = []
        for event in EVENTS:
            hooks = [h for h in self.hooks if h.event == event]
            if hooks:
                lines.append(f"{event}:")
            for h in hooks:
                where = "matches " + (h.matcher if h.matcher not in ("", "*") else "everything")
                lines.append(
                    f"  {h.command}  ({where if event in MATCHED_EVENTS else 'no matcher'}, "
                    f"timeout {h.timeout:g} s, {_shown(h.source, self.project)})"
                )
        if self.transcript is not None:
            lines.append(f"transcript for hooks: {self.transcript.path}")
        return "\n".join(lines)

    # -- the session's events ---------------------------------------------------------------------------
    async def session_start(self, source: str) -> None:
        """SessionStart (``startup``, ``clear``, ``compact``): its context waits for the next prompt."""
        if source != "compact":
            self.prompt_id = None
        for r in await self._run("SessionStart", {"source": source}, target=source):
            if r.context:
                self.pending.append(f"SessionStart hook additional context: {r.context}")
            elif r.exit_code == 0 and r.parsed.out is None and r.parsed.text:
                self.pending.append(f"SessionStart:{source} hook success: {r.parsed.text}")

    async def session_end(self, reason: str) -> None:
        await self._run("SessionEnd", {"reason": reason})

    async def pre_compact(self, trigger: str, instructions: str) -> None:
        """PreCompact; raises CompactBlocked when a hook exits 2 (the compaction does not happen)."""
        self.prompt_id = str(uuid.uuid4())  # Claude Code numbers /compact as a prompt
        ran = await self._run(
            "PreCompact", {"trigger": trigger, "custom_instructions": instructions or None}, target=trigger
        )
        refused = [error_prefix(r) for r in ran if r.exited_2]
        if refused:
            raise CompactBlocked("\n".join(refused))

    # -- the turn's events ------------------------------------------------------------------------------
    async def prompt(self, prompt: str) -> PromptOutcome:
        """UserPromptSubmit: context for the model; raises PromptBlocked (exit 2, decision block)."""
        self.prompt_id = str(uuid.uuid4())
        ran = await self._run("UserPromptSubmit", {"prompt": prompt})
        refused = [r.reason for r in ran if r.blocked]
        if refused:
            raise PromptBlocked("\n".join(refused))
        out = PromptOutcome(context=self.pending)
        self.pending = []
        for r in ran:
            if r.context:
                out.context.append(f"UserPromptSubmit hook additional context: {r.context}")
            elif r.exit_code == 0 and r.parsed.out is None and r.parsed.text:
                out.context.append(f"UserPromptSubmit hook success: {r.parsed.text}")
            if out.stop is None:
                out.stop = r.stop_reason
        return out

    async def pre_tool(self, block: Block) -> PreToolOutcome:
        """PreToolUse: the hooks' permission decision, a changed input, context, and whether to stop."""
        name = block["name"]
        payload = {"tool_name": name, "tool_input": block.get("input", {}), "tool_use_id": block["id"]}
        out = PreToolOutcome()
        refusals: list[str] = []
        updates: list[dict[str, Any]] = []
        for r in await self._run("PreToolUse", payload, target=name):
            d, why = r.decision, r.reason
            if d is None and _unreadable_decision(r):  # not allow, deny or ask: ask the user (a fork stopped)
                d, why = (
                    "ask",
                    f"the PreToolUse hook `{r.command}` gave a permission decision speculate cannot read",
                )
            if d == "deny":
                refusals.append(
                    f"PreToolUse:{name} hook error: "
                    + (error_prefix(r) if r.exited_2 else why or f"refused by `{r.command}`")
                )
            if d is not None and RANK[d] > RANK.get(out.decision or "", 0):
                out.decision, out.reason = d, why
            if (new := r.parsed.specific("updatedInput")) is not None:
                updates.append(new)
            if r.context:
                out.context.append(f"PreToolUse:{name} hook additional context: {r.context}")
            if out.stop is None and r.stop_reason is not None:
                out.stop = f"PreToolUse:{name} hook stopped continuation: {r.stop_reason}"
        if refusals:
            out.refusal = "\n".join(refusals)
        if updates:
            if self.sandboxed and any(u != updates[0] for u in updates):
                raise BoundaryReached(
                    "hook", f"PreToolUse hooks on {name} changed its input in different ways", discard=True
                )
            out.updated_input = updates[0]
        return out

    async def capture(self, block: Block, fs: FileSystem) -> str | None:
        """Before a file-writing call (Edit, Write, ...) that a PostToolUse hook will see: the file's text
        (``originalFile``)."""
        name = block["name"]
        path = registry.path_of(name, block.get("input", {}))
        if name in registry.WRITE_TOOLS and path is not None and self.would_run("PostToolUse", name):
            return await file_text(fs, path)
        return None

    async def post_tool(
        self, block: Block, result: Block, *, fs: FileSystem, before: str | None, duration_ms: int
    ) -> PostOutcome:
        """PostToolUse, after a successful call: block reasons and context for the model."""
        name, inp = block["name"], block.get("input", {})
        if not self.would_run("PostToolUse", name):
            return PostOutcome()
        path = registry.path_of(name, inp) if name in registry.FILE_READERS else None
        after = await file_text(fs, path) if path is not None else None
        response = tool_response(name, inp, result, before=before, after=after, duration_ms=duration_ms)
        payload = {
            "tool_name": name,
            "tool_input": inp,
            "tool_response": response,
            "tool_use_id": block["id"],
            "duration_ms": duration_ms,
        }
        return self._after(name, "PostToolUse", await self._run("PostToolUse", payload, target=name))

    async def post_tool_failure(self, block: Block, result: Block, *, duration_ms: int) -> PostOutcome:
        """PostToolUseFailure, after a call that failed (an ``is_error`` result it produced itself)."""
        name = block["name"]
        payload = {
            "tool_name": name,
            "tool_input": block.get("input", {}),
            "tool_use_id": block["id"],
            "error": text_of_result(result.get("content", "")),
            "is_interrupt": False,
            "duration_ms": duration_ms,
        }
        return self._after(
            name, "PostToolUseFailure", await self._run("PostToolUseFailure", payload, target=name)
        )

    def _after(self, name: str, event: str, ran: list[HookRan]) -> PostOutcome:
        out = PostOutcome()
        for r in ran:
            if r.blocked:
                why = error_prefix(r) if r.exited_2 else r.reason
                out.context.append(f'{event}:{name} hook blocking error from command: "{r.command}": {why}')
            if r.context:
                out.context.append(f"{event}:{name} hook additional context: {r.context}")
            if out.stop is None and r.stop_reason is not None:
                out.stop = f"{event}:{name} hook stopped continuation: {r.stop_reason}"
        return out

    async def stop(self, active: bool, last_message: str = "") -> StopOutcome:
        """Stop: the feedback the turn goes on with (exit 2, decision block), or None: it ends."""
        ran = await self._run("Stop", {"stop_hook_active": active, "last_assistant_message": last_message})
        feedback = [error_prefix(r) if r.exited_2 else r.reason for r in ran if r.blocked]
        out = StopOutcome(feedback="\n".join(feedback) if feedback else None)
        out.stop = next((r.stop_reason for r in ran if r.stop_reason is not None), None)
        return out

    # -- running ---------------------------------------------------------------------------------------
    async def _run(self, event: str, fields: dict[str, Any], *, target: str | None = None) -> list[HookRan]:
        hooks = self.matching(event, target)
        if not hooks:
            return []
        tool = target if event in ("PreToolUse", "PostToolUse", "PostToolUseFailure") else None
        if self.boundary is not None:
            what = f"{event} hook `{hooks[0].command}`" + (f" on {tool}" if tool else "")
            raise BoundaryReached("hook", f"{what}: {self.boundary}")
        if self.transcript is not None and self.messages is not None:
            self.transcript.sync(self.messages)  # the hook may read the conversation up to here
        payload = {
            **common_fields(
                event,
                session_id=self.session_id,
                transcript_path=self.transcript_path,
                cwd=str(self.project),
                prompt_id=self.prompt_id,
                mode=self.mode(),
            ),
            **fields,
        }
        stdin = json.dumps(payload).encode()
        env = hook_env(project=str(self.project), session_id=self.session_id)
        results: list[ShellResult | None] = [None] * len(hooks)

        async def one(i: int, h: Hook) -> None:
            results[i] = await self.shell.run(h.command, timeout=h.timeout, stdin=stdin, env=env)

        if self.sandboxed:  # one sandboxed command at a time on an overlay (its upper layer takes one mount)
            for i, h in enumerate(hooks):
                await one(i, h)
        else:
            async with trio.open_nursery() as nursery:  # matching hooks run in parallel, as in Claude Code
                for i, h in enumerate(hooks):
                    nursery.start_soon(one, i, h)
        out = []
        for h, res in zip(hooks, results, strict=True):
            assert res is not None
            parsed = parse_output(event, res.stdout) if not (res.timed_out or res.exit_code == 2) else None
            # Its output reaches the conversation (context, tool results, feedback): cut to a budget, never a
            # poisoned session. JSON is read whole first; the context it carries is cut where it is used.
            ran = HookRan(
                event,
                h.command,
                res.exit_code,
                cut(res.stdout, HOOK_OUTPUT_BUDGET, what="hook output"),
                cut(res.stderr, HOOK_OUTPUT_BUDGET, what="hook output"),
                res.timed_out,
                tool,
                self.sandboxed,
                **({"parsed": parsed} if parsed is not None else {}),
            )
            self.on_event(ran)
            out.append(ran)
        if self.sandboxed:
            for ran in out:
                _fail_closed(ran)
        return out


def _unreadable_decision(r: HookRan) -> bool:
    """The hook named a permission decision that did not validate (``"maybe"``, ``"Deny"``)."""
    raw = r.parsed.raw or {}
    spec = raw.get("hookSpecificOutput")
    named = (
        isinstance(spec, dict) and "permissionDecision" in spec and spec.get("hookEventName") == "PreToolUse"
    )
    return (named and r.parsed.specific("permissionDecision") is None) or (
        "decision" in raw and r.parsed.get("decision") is None and r.event == "PreToolUse"
    )


def _fail_closed(r: HookRan) -> None:
    """In a fork: stop at a hook that failed, or whose output speculate cannot read or that stops the turn."""
    if r.failed:
        how = "timed out" if r.timed_out else f"exited {r.exit_code}"
        raise BoundaryReached(
            "hook", _what(r) + f" {how} in the speculation's sandbox" + _stderr(r), discard=True
        )
    if r.parsed.problems:
        raise BoundaryReached(
            "hook",
            _what(r) + " printed output speculate cannot read: " + "; ".join(r.parsed.problems)[:300],
            discard=True,
        )
    if r.stop_reason is not None:
        raise BoundaryReached(
            "hook", _what(r) + f" stopped the turn (continue: false): {r.stop_reason}"[:300], discard=True
        )


def _what(r: HookRan) -> str:
    return f"{r.event} hook `{r.command}`" + (f" on {r.tool}" if r.tool else "")


def _stderr(r: HookRan) -> str:
    err = " ".join(r.stderr.split())
    err = err if len(err) <= 300 else err[:297] + "..."
    return f": {err}" if err else " (no stderr)"


def _shown(path: Path, project: Path) -> str:
    try:
        return str(path.relative_to(project))
    except ValueError:
        return str(path).replace(str(Path.home()), "~", 1)


def elapsed_ms(t0: float) -> int:
    return int((time.perf_counter() - t0) * 1000)
