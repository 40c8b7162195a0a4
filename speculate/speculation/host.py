"""What the speculation engine needs from the session that owns it: a small interface, so the engine never
reaches into the session's private parts. :class:`speculate.session.Session` implements it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from speculate.agent_types import AgentEvent
    from speculate.hooks import HookTranscript
    from speculate.models.base import CacheKey, Usage
    from speculate.session_types import SessionConfig, TurnOutcome
    from speculate.speculation.approvals import ApproveFn
    from speculate.speculation.authorize import MainAuthorizer
    from speculate.speculation.events import EventLog, SpeculationRecord
    from speculate.tools.base import Tool, ToolContext
    from speculate.types import Message
    from speculate.workspace import Workspace

# The records' vocabulary (how a fork ended, what became of a speculation or a suggestion) lives with the
# records, so that one schema checks both what the engine writes and what ``speculate stats`` reads.
# Why a speculation was dropped (SpeculationRecord.reason for an abort).
IgnoreReason = Literal[
    "typed", "dismissed", "stopped", "instructions_changed", "no_speculation", "shutdown", "compacted"
]


class Host(Protocol):
    """The session as the engine sees it."""

    cfg: SessionConfig
    project: Path
    key: CacheKey
    tools: list[Tool]
    ctx: ToolContext  # the live tools' context: where the session's Bash commands run now (ctx.cwd)
    messages: list[Message]
    spill_dir: Path
    session_id: str
    workspace: Workspace
    authorizer: MainAuthorizer
    approve: ApproveFn | None  # the approval policy on acceptance; None: ask as the live path would
    events: EventLog
    turn: int
    last_error: bool
    hook_transcript: HookTranscript | None  # a fork's hooks get a fork of it

    def on_event(self, event: AgentEvent | Any) -> None: ...
    def agent_last_usage(self) -> Usage | None: ...
    def set_agent_last_usage(self, usage: Usage | None) -> None: ...
    def near_context_limit(self) -> bool: ...

    async def run_turn(
        self,
        prompt: str,
        t0: float,
        *,
        resume: bool = False,
        note: str = "",
        spec: SpeculationRecord | None = None,
    ) -> TurnOutcome:
        """A normal turn for ``prompt`` (or, ``resume``, from the injected messages on)."""
        ...
