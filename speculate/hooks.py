"""Hooks: the user's shell commands around a turn, with Claude Code's protocol.

Four events (set in ``.claude/settings.json``, see :mod:`speculate.settings`):

=================  ======================================  ==============================================
event              exit 0                                  exit 2
=================  ======================================  ==============================================
PreToolUse         the call runs; stdout shown to the user the call does not run; stderr goes back to the
                                                           model as an ``is_error`` tool result
PostToolUse        stdout shown to the user                stderr is added to the tool result (the call
                   (after a successful call only)          already ran)
UserPromptSubmit   stdout is added to the prompt as        the prompt is not sent; stderr is shown to the
                   context                                 user
Stop               the turn ends; stdout shown             the turn goes on, with stderr as the next
                                                           user message (``stop_hook_active`` is then true)
=================  ======================================  ==============================================

Any other exit status, or a timeout, is a warning shown to the user; the turn goes on (in the main loop,
as in Claude Code). In a speculative fork it fails closed: the fork stops at a ``hook`` boundary with the
hook's stderr, and its overlay is discarded (what the hook meant to refuse, or half did, must not land). The event is JSON on
stdin (``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``, ``hook_event_name`` and the
event's own fields); ``$CLAUDE_PROJECT_DIR`` is the project. Matching hooks run one after another, in
settings order, each distinct command once.

Where a hook runs is the runner's ``shell``: the main loop's runs on the real tree; a speculative fork's
runs in the speculation sandbox against its overlay, and where there is no sandbox ``boundary`` says why,
and a hook that would run stops the fork instead (:class:`speculate.agent_types.BoundaryReached` ``hook``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from speculate import ShellResult
from speculate.agent_types import BoundaryReached
from speculate.settings import Hook
from speculate.tools.budget import HOOK_OUTPUT_BUDGET, cut
from speculate.types import Block


class HookShell(Protocol):
    async def run(self, command: str, *, timeout: float, stdin: bytes | None = None,
                  env: dict[str, str] | None = None) -> ShellResult: ...


@dataclass(frozen=True)
class HookRan:
    """One hook command ran (an event for the REPL, and for a fork's record)."""

    event: str
    command: str
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    tool: str | None = None
    sandboxed: bool = False

    @property
    def blocked(self) -> bool:
        return self.exit_code == 2 and not self.timed_out

    @property
    def failed(self) -> bool:
        return self.timed_out or self.exit_code not in (0, 2)


class PromptBlocked(Exception):
    """A UserPromptSubmit hook refused the prompt (exit 2); the message (its stderr) is for the user."""


def _reason(r: HookRan) -> str:
    return r.stderr.strip() or f"(the hook `{r.command}` gave no reason)"


class HookRunner:
    """Runs the settings' hooks for one agent: the main loop's, or a speculative fork's."""

    def __init__(self, hooks: Sequence[Hook], *, shell: HookShell, project: Path, session_id: str,
                 mode: Callable[[], str], transcript_path: str = "", sandboxed: bool = False,
                 boundary: str | None = None, on_event: Callable[[HookRan], None] | None = None) -> None:
        self.hooks = tuple(hooks)
        self.shell, self.project, self.session_id = shell, project, session_id
        self.mode, self.transcript_path = mode, transcript_path
        self.sandboxed = sandboxed
        self.boundary = boundary  # set: no sandbox for this fork, so a hook that would run stops it
        self.on_event = on_event or (lambda e: None)

    def matching(self, event: str, tool: str | None = None) -> list[Hook]:
        out: list[Hook] = []
        for h in self.hooks:
            if h.event == event and h.matches(tool) and all(h.command != o.command for o in out):
                out.append(h)
        return out

    def would_run(self, event: str, tool: str | None = None) -> bool:
        return bool(self.matching(event, tool))

    def stops_call(self, tool: str) -> str | None:
        """In a fork without a sandbox: why a call to ``tool`` must not start (a hook would run around it)."""
        if self.boundary is None:
            return None
        hooks = self.matching("PreToolUse", tool) or self.matching("PostToolUse", tool)
        return f"{hooks[0].event} hook `{hooks[0].command}` on {tool}: {self.boundary}" if hooks else None

    # -- the four events --------------------------------------------------------------------------------
    async def prompt(self, prompt: str) -> list[str]:
        """Context lines to add to the prompt; raises PromptBlocked on exit 2."""
        context = []
        for r in await self._run("UserPromptSubmit", {"prompt": prompt}):
            if r.blocked:
                raise PromptBlocked(_reason(r))
            if r.exit_code == 0 and r.stdout.strip():
                context.append(r.stdout.strip())
        return context

    async def pre_tool(self, block: Block) -> str | None:
        """None: the call may run. A string: the call is refused, and this is the model's tool result."""
        payload = {"tool_name": block["name"], "tool_input": block.get("input", {}), "tool_use_id": block["id"]}
        for r in await self._run("PreToolUse", payload, tool=block["name"]):
            if r.blocked:
                return f"PreToolUse hook refused this call: {_reason(r)}"
        return None

    async def post_tool(self, block: Block, result: Block) -> str | None:
        """Feedback for the model from a hook that exited 2, or None."""
        payload = {"tool_name": block["name"], "tool_input": block.get("input", {}), "tool_use_id": block["id"],
                   "tool_response": {"content": result.get("content", "")}}
        feedback = [_reason(r) for r in await self._run("PostToolUse", payload, tool=block["name"]) if r.blocked]
        return "PostToolUse hook feedback: " + "\n".join(feedback) if feedback else None

    async def stop(self, active: bool) -> str | None:
        """What the turn goes on with when a Stop hook exits 2, or None: the turn ends."""
        feedback = [_reason(r) for r in await self._run("Stop", {"stop_hook_active": active}) if r.blocked]
        return "Stop hook feedback: " + "\n".join(feedback) if feedback else None

    # -- running ---------------------------------------------------------------------------------------
    async def _run(self, event: str, fields: dict[str, Any], *, tool: str | None = None) -> list[HookRan]:
        hooks = self.matching(event, tool)
        if hooks and self.boundary is not None:
            what = f"{event} hook `{hooks[0].command}`" + (f" on {tool}" if tool else "")
            raise BoundaryReached("hook", f"{what}: {self.boundary}")
        payload = {"session_id": self.session_id, "transcript_path": self.transcript_path,
                   "cwd": str(self.project), "permission_mode": self.mode(), "hook_event_name": event, **fields}
        stdin = json.dumps(payload).encode()
        out = []
        for h in hooks:
            res = await self.shell.run(h.command, timeout=h.timeout, stdin=stdin,
                                       env={"CLAUDE_PROJECT_DIR": str(self.project)})
            # Its output reaches the conversation (context, tool results): cut to a budget, never a poisoned session.
            ran = HookRan(event, h.command, res.exit_code, cut(res.stdout, HOOK_OUTPUT_BUDGET, what="hook output"),
                          cut(res.stderr, HOOK_OUTPUT_BUDGET, what="hook output"), res.timed_out, tool, self.sandboxed)
            self.on_event(ran)
            if self.sandboxed and ran.failed:  # a fork's hook: fail closed (the main loop's only warns)
                raise BoundaryReached("hook", _failure(ran), discard=True)
            out.append(ran)
        return out


def _failure(r: HookRan) -> str:
    how = "timed out" if r.timed_out else f"exited {r.exit_code}"
    err = " ".join(r.stderr.split())
    err = err if len(err) <= 300 else err[:297] + "..."
    return (f"{r.event} hook `{r.command}`" + (f" on {r.tool}" if r.tool else "")
            + f" {how} in the speculation's sandbox" + (f": {err}" if err else " (no stderr)"))
