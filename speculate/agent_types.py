"""What the agent loop shares with its callers: the exceptions it raises, what it is given, what it reports.

Control flow: :class:`ToolDenied` (becomes an ``is_error`` result), :class:`BoundaryReached` (a
speculative fork must stop before this call; propagates out of ``run``) and :class:`MaxTurnsReached`.
The loop is given an :class:`Authorizer` and optionally :class:`Hooks`; it reports :data:`AgentEvent`s
while it runs and a :class:`TurnResult` at the end. The loop itself is :mod:`speculate.agent`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from speculate.errors import SpeculateError
from speculate.models.base import ModelResponse, TextDelta, Usage
from speculate.tools.base import Tool
from speculate.types import Block


class ToolDenied(SpeculateError):
    """A call that must not run; the message goes back to the model as an is_error result."""


# Where a speculative fork must stop before a call (see docs/speculation.md, "Boundaries").
BoundaryKind = Literal[
    "edit",
    "bash",
    "hook",
    "mcp",
    "instructions",
    "protected",
    "unsafe_file",
    "denied_tool",
    "resource",
    "error",
]


class BoundaryReached(SpeculateError):
    """A speculative fork reached a call it must not make without the user (edit, bash, denied tool, cap)."""

    def __init__(
        self, kind: BoundaryKind, detail: str, tool_use_id: str | None = None, *, discard: bool = False
    ) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind: BoundaryKind = kind
        self.detail = detail
        self.tool_use_id = tool_use_id
        self.discard = discard  # the overlay already holds what made this a boundary: nothing may be promoted


class MaxTurnsReached(SpeculateError):
    """The loop's bound: ``kind`` says which (requests in this turn, or messages in the conversation)."""

    def __init__(self, kind: Literal["max_turns", "max_messages"], limit: int) -> None:
        super().__init__(f"{kind} ({limit})")
        self.kind: Literal["max_turns", "max_messages"] = kind
        self.limit = limit


class Authorizer(Protocol):
    """Decides each tool call. Raise ToolDenied to refuse, BoundaryReached to stop a fork.

    A call goes ``before_hooks`` (refusals that come before the PreToolUse hooks: Claude Code refuses a file
    tool's path that a deny rule covers without running them), then the PreToolUse hooks, then
    ``authorize`` with their decision (``allow`` skips the permission prompt but not a deny or ask rule;
    ``ask`` asks even where the rules allow; a ``deny`` never gets here) and the input they left."""

    def preauthorized(self, tool: Tool, inp: BaseModel) -> bool:
        """May this call start now, without asking anyone (used to start reads while streaming)?"""
        ...

    async def before_hooks(self, tool: Tool, inp: BaseModel, block: Block) -> None: ...

    async def authorize(
        self,
        tool: Tool,
        inp: BaseModel,
        block: Block,
        *,
        hook: Literal["allow", "ask"] | None = None,
        hook_reason: str = "",
    ) -> None: ...


class Hooks(Protocol):
    """The user's hooks (:class:`speculate.hooks.HookRunner`); outcomes in :mod:`speculate.hooks.events`.
    ``prompt`` raises PromptBlocked to refuse the prompt. In a fork any of them may raise BoundaryReached."""

    def attach(self, messages: list[Any]) -> None: ...
    def would_run(self, event: str, target: str | None = None) -> bool: ...
    async def prompt(self, prompt: str) -> Any: ...
    async def pre_tool(self, block: Block) -> Any: ...
    async def capture(self, block: Block, fs: Any) -> str | None: ...
    async def post_tool(
        self, block: Block, result: Block, *, fs: Any, before: str | None, duration_ms: int
    ) -> Any: ...
    async def post_tool_failure(self, block: Block, result: Block, *, duration_ms: int) -> Any: ...
    async def stop(self, active: bool, last_message: str = "") -> Any: ...


@dataclass(frozen=True)
class ToolStarted:
    id: str
    name: str
    summary: str


@dataclass(frozen=True)
class ToolFinished:
    id: str
    name: str
    summary: str
    is_error: bool
    duration_s: float
    result: str = field(repr=False, default="")
    denied: bool = False  # refused before it ran (permission, invalid input, no such tool)
    input: dict[str, Any] = field(repr=False, default_factory=dict)  # the call's arguments (the REPL's diffs)


@dataclass(frozen=True)
class ResponseDone:
    response: ModelResponse


AgentEvent = TextDelta | ToolStarted | ToolFinished | ResponseDone


@dataclass
class TurnResult:
    text: str = ""
    stop: str = ""  # end_turn | refusal | max_turns | max_tokens | ...
    responses: list[ModelResponse] = field(default_factory=list)
    tools_run: int = 0
    stop_hooks_blocked: int = 0
    hook_stopped: str = ""  # a hook said ``continue: false``: the turn ended there (what it said)
    written: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    finished: float = 0.0

    @property
    def usage(self) -> Usage:
        total = Usage()
        for r in self.responses:
            total = total.add(r.usage)
        return total

    @property
    def duration_s(self) -> float:
        return (self.finished or time.perf_counter()) - self.started


def summarize(name: str, inp: dict[str, Any]) -> str:
    for k in ("command", "file_path", "pattern", "path"):
        if k in inp:
            v = str(inp[k])
            return f"{name}({v[:77] + '...' if len(v) > 80 else v})"
    return f"{name}()"
