"""Authorizers: the main loop's (permission gate + asking the user) and a speculative fork's, which puts
every call through the same gate and, where the live path would ask, either stops the fork before the
call (a boundary) or, for a sandboxed Bash command, runs it and records it for approval on acceptance.

Both take the PreToolUse hooks' decision (:class:`speculate.agent_types.Authorizer`): ``allow`` answers the
permission prompt (a deny or an ask rule still applies, as in Claude Code), ``ask`` asks even where the
rules allow, and in a fork is a gate ``ask`` like any other: a sandboxed Bash command's approval on
acceptance, a boundary before an edit or any other call.

A command the parser (:func:`speculate.shell.facts.analyze`) finds writing a protected path (``git commit``,
``git add``: the repository; a redirection into ``.git/`` or ``.claude/``) stops the fork *before* it runs: its
work so far can land, and the command runs live on acceptance, asked about as the live path asks. Run in the
fork, it would only make the whole overlay unlandable (the guard's check after a command, which stays for what
the parser cannot see)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import trio
from pydantic import BaseModel

from speculate.agent_types import BoundaryKind, BoundaryReached, ToolDenied, summarize
from speculate.tools.base import Tool, ToolContext
from speculate.tools.registry import (
    FILE_TOOLS,
    PATH_FIELDS,
    SHELL,
    SHELL_TOOLS,
    SPECULATIVE_TOOLS,
    WRITE_TOOLS,
)
from speculate.types import Block

if TYPE_CHECKING:
    from speculate.permissions import Mode
    from speculate.speculation.approvals import Approvals
    from speculate.speculation.guard import Protection

AskFn = Callable[[str, str], Awaitable[Literal["y", "n", "always"]]]
# The tools a fork may run, those it stops before where the live path would ask, those whose path a deny rule
# refuses before any hook runs (as Claude Code does while checking their input), and the shell: derived from
# what each tool declares (speculate.tools.registry).
SPEC_TOOLS = SPECULATIVE_TOOLS
HookDecision = Literal["allow", "ask"] | None


def _gate(
    mode: Mode,
    allow: Sequence[str],
    deny: Sequence[str],
    root: Path | None,
    ask: Sequence[str] = (),
    additional_dirs: Sequence[str | Path] = (),
) -> Any:
    from speculate.permissions import PermissionGate

    return PermissionGate(
        mode=mode,
        allow=list(allow),
        deny=list(deny),
        ask=list(ask),
        root=root,
        additional_dirs=list(additional_dirs),
    )


@dataclass(frozen=True)
class Question:
    """A call the live path asks about: the tool, its full arguments, and the allow rule an ``always``
    answer adds for the rest of the session (``Bash(CMD)`` for a command, else the tool's name)."""

    tool: str
    input: dict[str, Any]
    rule: str


def cwd_of(ctx: ToolContext | None) -> Path | None:
    """The Bash tool's current directory in ``ctx`` (None without one: the gate takes the project root)."""
    return ctx.cwd if ctx is not None else None


def _path_of(tool: Tool, inp: BaseModel) -> str:
    """The file a file tool's call names ("" for a tool without one)."""
    return str(getattr(inp, PATH_FIELDS.get(tool.name, ""), "") or "")


def always_rule(tool: str, inp: BaseModel) -> str:
    cmd = getattr(inp, "command", None)
    return f"{SHELL}({cmd})" if tool in SHELL_TOOLS and cmd else tool


class MainAuthorizer:
    """The normal loop: allowed calls run, denied ones get an is_error result, the rest ask the user."""

    # The tools' context, whose Bash directory (``ctx.cwd``) the gate is given; the session sets it.
    ctx: ToolContext | None = None

    def __init__(
        self,
        *,
        mode: Mode,
        allow: list[str],
        deny: list[str],
        ask: AskFn | None,
        root: Path | None = None,
        ask_rules: Sequence[str] = (),
        additional_dirs: Sequence[str | Path] = (),
    ) -> None:
        self.mode, self.allow, self.deny, self.ask, self.root = mode, list(allow), list(deny), ask, root
        self.ask_rules = list(ask_rules)
        # The working directories besides the project (settings' additionalDirectories, --add-dir).
        self.additional_dirs = list(additional_dirs)
        self.gate = self._new_gate()
        self.pending_ask = False  # a permission prompt is on screen (suppresses suggestions)
        # The call being asked about, while ``ask`` runs: its full arguments and the rule ``always`` adds
        # (the REPL shows them; ``ask`` itself gets the tool and a one-line summary).
        self.question: Question | None = None
        # Questions answered at a declined acceptance (question by question, approvals.ask_each), in order:
        # the live turn that follows takes these answers instead of asking again, while its questions are the
        # same ones in the same order (a typed turn asks each once; an accepted one must not ask more).
        self.carried: list[tuple[str, str, str]] = []

    def _new_gate(self) -> Any:
        return _gate(self.mode, self.allow, self.deny, self.root, self.ask_rules, self.additional_dirs)

    def carry(self, given: Sequence[tuple[str, str, str]]) -> None:
        """Answers given at acceptance for the live turn after it (``always`` is a rule already: left out)."""
        self.carried = [g for g in given if g[2] != "always"]

    def set_mode(self, mode: Mode) -> None:
        self.mode = mode
        self.gate = self._new_gate()

    def preauthorized(self, tool: Tool, inp: BaseModel) -> bool:
        return self.gate.check(tool, inp, cwd=cwd_of(self.ctx)).behavior == "allow"

    async def before_hooks(self, tool: Tool, inp: BaseModel, block: Block) -> None:
        if (
            tool.name in FILE_TOOLS
            and (d := self.gate.check(tool, inp, cwd=cwd_of(self.ctx))).behavior == "deny"
            and not d.unasked  # dontAsk's refusal of an ask: the PreToolUse hook may still answer it
        ):
            raise ToolDenied(d.reason)

    async def authorize(
        self,
        tool: Tool,
        inp: BaseModel,
        block: Block,
        *,
        hook: HookDecision = None,
        hook_reason: str = "",
        cwd: Path | None = None,
    ) -> None:
        """``cwd``: where the Bash command runs, when not in this session's directory (an accepted fork's)."""
        d = self.gate.check(tool, inp, cwd=cwd or cwd_of(self.ctx))
        if d.behavior == "deny" and not (d.unasked and hook == "allow" and not d.firm):
            raise ToolDenied(d.reason)
        if hook == "allow" and not (d.behavior == "ask" and d.firm):
            return  # the hook answered the prompt; an ask rule still asks
        if hook != "ask" and d.behavior == "allow":
            return
        reason = (hook_reason or "a PreToolUse hook asks") if hook == "ask" else d.reason
        if self.ask is None:
            raise ToolDenied(f"{reason} (no one to ask in this session)")
        summary = summarize(tool.name, block.get("input", {}))
        carried = self.carried.pop(0) if self.carried else None
        if carried is not None and carried[:2] == (tool.name, summary):
            answer = carried[2]  # answered at acceptance, this very question: not asked twice
        else:
            self.carried = []  # the live turn went another way: every later question is asked
            self.pending_ask = True
            self.question = Question(tool.name, dict(block.get("input", {})), always_rule(tool.name, inp))
            try:
                answer = await self.ask(tool.name, summary)
            finally:
                self.pending_ask, self.question = False, None
        if answer == "n":
            raise ToolDenied("the user declined this call")
        if answer == "always":
            self.remember(always_rule(tool.name, inp))

    def remember(self, rule: str) -> None:
        """An ``always`` answer: from now on the gate allows this call (``Bash(CMD)`` or the tool)."""
        if rule not in self.allow:
            self.allow.append(rule)
            self.gate = self._new_gate()


class SpecAuthorizer:
    """A fork's gate: the live path's gate (mode, rules; hooks run around the calls as live), and it never
    asks. A call the live path would ask about stops the fork before it (BoundaryReached), except a
    sandboxed Bash command, which runs and is recorded in ``approvals`` for the question on acceptance.
    So is a call whose effects the sandbox cannot contain, or that writes a protected path (``protection``:
    instructions and execution-config files, through ``fs``'s symlinks too).

    Once the speculation is accepted (``go_live``), the user is there: a command the live path would ask
    about is asked about at the call, through the main authorizer, as it would be live (one question at a
    time: ``asking`` is held while the acceptance question is open).

    ``hook_stop(tool)`` says why a call must not start because a hook would run around it where there is
    no sandbox (:meth:`speculate.hooks.HookRunner.stops_call`).
    """

    # The fork's tools' context, whose Bash directory the gate is given; the fork's runner sets it.
    ctx: ToolContext | None = None

    def __init__(
        self,
        *,
        mode: Mode,
        allow: list[str],
        deny: list[str],
        sandboxed_bash: bool,
        root: Path | None = None,
        bash_off: str = "off (no sandbox here)",
        ask_rules: Sequence[str] = (),
        hook_stop: Callable[[str], str | None] | None = None,
        protection: Protection | None = None,
        fs: Any = None,
        approvals: Approvals | None = None,
        additional_dirs: Sequence[str | Path] = (),
        defer_edits: bool = False,
    ) -> None:
        from speculate.speculation.guard import Protection

        self.gate = _gate(mode, allow, deny, root, ask_rules, additional_dirs)
        self.root = root
        self.sandboxed_bash = sandboxed_bash
        self.bash_off = bash_off
        self.hook_stop = hook_stop or (lambda tool: None)
        self.protection = protection or Protection()
        self.fs = fs
        self.approvals = approvals
        # True (SessionConfig.spec_edits "ask"): a Write/Edit in the project that the live path would ask about
        # is written into the overlay and asked about on acceptance, as a sandboxed command is; False: it
        # is an `edit` boundary.
        self.defer_edits = defer_edits
        self.live: MainAuthorizer | None = None
        self.asking = trio.Lock()

    def go_live(self, main: MainAuthorizer) -> None:
        self.live = main

    def _boundary(
        self,
        tool: Tool,
        inp: BaseModel,
        hook: HookDecision = None,
        hook_reason: str = "",
        *,
        early: bool = False,
    ) -> tuple[BoundaryKind, str] | None:
        """Where the fork must stop before this call. ``early``: before its PreToolUse hooks, only what no hook
        decision changes (a deny, what the sandbox cannot hold, protected paths)."""
        is_mcp = tool.name.startswith("mcp__")
        if tool.name not in SPEC_TOOLS and not is_mcp:
            return "denied_tool", f"{tool.name} is not allowed while speculating"
        d = self.gate.check(tool, inp, cwd=cwd_of(self.ctx))
        if d.behavior == "deny":
            return "denied_tool", d.reason
        if is_mcp and not tool.is_read_only(inp):
            # The server runs on the user's machine, outside any overlay: only tools the user declared
            # read-only (settings speculation.readOnlyMcpTools) may run before acceptance.
            return "mcp", f"{tool.name}: an MCP call acts outside the overlay (not declared read-only)"
        if tool.name in WRITE_TOOLS:
            path = str(getattr(inp, PATH_FIELDS.get(tool.name, ""), ""))
            kind = self._protected(path)
            if kind == "instructions":
                return "instructions", f"{tool.name} {path}: the next request's system prompt would change"
            if kind == "protected":
                return "protected", (
                    f"{tool.name} {path}: it configures what runs later (git, editor, Claude "
                    "Code, direnv, or speculation.protectedPaths); it lands only through a "
                    "normal turn"
                )
            if self._deferred(tool, path):
                pass  # the live path's question is asked on acceptance (_asks, authorize)
            elif not early and hook == "ask":
                return (
                    "edit",
                    f"{tool.name} {path}: a PreToolUse hook asks ({hook_reason or 'no reason given'})",
                )
            elif not early and d.behavior == "ask" and not (hook == "allow" and not d.firm):
                return "edit", f"{tool.name} {path} needs permission"
        elif tool.name in SHELL_TOOLS:
            cmd = getattr(inp, "command", "")
            if not self.sandboxed_bash:
                # No sandbox, no speculative Bash: even a read-only command would read the real tree
                # (missing the fork's own changes) and run on the host.
                return "bash", f"{cmd!r}: speculative Bash is {self.bash_off}"
            from speculate.shell import classify

            # With the root, paths inside the project (absolute ones too) count as inside the sandbox,
            # and symlinks leading out of it are followed.
            c = classify(cmd, project_root=str(self.root) if self.root is not None else None)
            if not c.sandboxable:
                return "bash", f"{cmd!r}: {c.reason}"
            if self.root is not None and self.fs is not None:
                from speculate.speculation.guard import command_boundary

                stop = command_boundary(
                    cmd,
                    root=self.root,
                    fs=self.fs,
                    cwd=cwd_of(self.ctx) or self.root,
                    protection=self.protection,
                )
                if stop is not None:
                    return stop
            # A command the gate would ask about runs in the sandbox; authorize() records it for approval.
        elif early:
            pass
        elif hook == "ask":
            return (
                "hook",
                f"{tool.name}: a PreToolUse hook asks before it ({hook_reason or 'no reason given'})",
            )
        elif d.behavior == "ask" and d.firm:  # an ask rule or a sensitive file: the user would be asked
            return "denied_tool", d.reason
        why = self.hook_stop(tool.name)
        return ("hook", why) if why else None

    def _protected(self, path: str) -> str | None:
        from overlayfs.paths import PathEscapeError, to_relative

        if self.root is None or not path:
            return None
        try:
            rel = to_relative(self.root, path)
        except (PathEscapeError, FileNotFoundError):
            return None
        return self.protection.of_write(self.fs, rel) if self.fs is not None else self.protection.kind(rel)

    def _deferred(self, tool: Tool, path: str) -> bool:
        """Is this Write/Edit one whose question waits for acceptance (``defer_edits``, a file in the
        project: the overlay holds only the project)?"""
        if not self.defer_edits or tool.name not in WRITE_TOOLS or self.root is None or not path:
            return False
        from overlayfs.paths import PathEscapeError, to_relative

        try:
            to_relative(self.root, path)
        except (PathEscapeError, FileNotFoundError):
            return False
        return True

    def _asks(
        self, tool: Tool, inp: BaseModel, hook: HookDecision = None, hook_reason: str = ""
    ) -> str | None:
        """Why the live path would ask before this call (a sandboxed Bash command; a deferred edit), or
        None."""
        if tool.name not in SHELL_TOOLS and not self._deferred(tool, _path_of(tool, inp)):
            return None
        if hook == "ask":
            return f"a PreToolUse hook asks ({hook_reason or 'no reason given'})"
        d = self.gate.check(tool, inp, cwd=cwd_of(self.ctx))
        return d.reason if d.behavior == "ask" and not (hook == "allow" and not d.firm) else None

    def preauthorized(self, tool: Tool, inp: BaseModel) -> bool:
        return self._boundary(tool, inp) is None and self._asks(tool, inp) is None

    async def before_hooks(self, tool: Tool, inp: BaseModel, block: Block) -> None:
        b = self._boundary(tool, inp, early=True)
        if b is not None:
            raise BoundaryReached(b[0], b[1], block.get("id"))

    async def authorize(
        self, tool: Tool, inp: BaseModel, block: Block, *, hook: HookDecision = None, hook_reason: str = ""
    ) -> None:
        b = self._boundary(tool, inp, hook, hook_reason)
        if b is not None:
            raise BoundaryReached(b[0], b[1], block.get("id"))
        why = self._asks(tool, inp, hook, hook_reason)
        if why is None:
            return
        if self.live is not None:  # accepted: the user is asked at the call, as live (ToolDenied on "n")
            async with self.asking:
                await self.live.authorize(
                    tool, inp, block, hook=hook, hook_reason=hook_reason, cwd=cwd_of(self.ctx)
                )
            return
        edit = tool.name not in SHELL_TOOLS
        if self.approvals is None:
            if edit:
                raise BoundaryReached("edit", f"{tool.name} {_path_of(tool, inp)}: {why}", block.get("id"))
            raise BoundaryReached("bash", f"{getattr(inp, 'command', '')!r}: {why}", block.get("id"))
        self.approvals.expect(
            tool.name,
            summarize(tool.name, block.get("input", {})),
            str(getattr(inp, "command", "")),
            why,
            str(block.get("id", "")),
            input=dict(block.get("input", {})),
            path=_path_of(tool, inp) if edit else None,
        )
