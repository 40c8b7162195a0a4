"""What the speculation engine needs from the session that owns it: a small interface, so the engine never
reaches into the session's private parts. :class:`speculate.session.Session` implements it.

The seam is one-way: the session drives the engine (``after_turn`` with a :class:`TurnState`, ``accept``,
``ignore``) and acts on what it decides (:class:`speculate.speculation.accept.Acceptance`); the engine reads
the session's configuration through :class:`Host`, reports through ``on_event`` and its records, and never
runs a turn or changes the conversation itself. It runs its cycles in a nursery of its own
(:meth:`speculate.speculation.engine.SpeculationEngine.running`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from speculate.agent_types import AgentEvent
    from speculate.hooks import HookTranscript
    from speculate.models.base import CacheKey, Usage
    from speculate.session_types import SessionConfig
    from speculate.speculation.approvals import ApproveFn
    from speculate.speculation.authorize import MainAuthorizer
    from speculate.speculation.events import EventLog
    from speculate.tools.base import ShellDir, Tool
    from speculate.types import Message
    from speculate.workspace import Workspace

# The records' vocabulary (how a fork ended, what became of a speculation or a suggestion) lives with the
# records, so that one schema checks both what the engine writes and what ``speculate stats`` reads.
# Why a speculation was dropped (SpeculationRecord.reason for an abort).
IgnoreReason = Literal[
    "typed", "dismissed", "stopped", "instructions_changed", "no_speculation", "shutdown", "compacted"
]


@dataclass(frozen=True)
class TurnState:
    """The session as a finished turn left it, handed to the engine for the next cycle: the conversation
    (a copy: the forks start from it), the turn's number, the cache key, where its Bash ended, and what
    decides whether a suggestion is worth asking for."""

    messages: list[Message]
    turn: int
    key: CacheKey
    shell_dir: ShellDir  # the session's Bash directory (read, never written: a fork starts from a copy)
    last_usage: Usage | None  # of the turn's last response (the cold-cache check, the policy's context size)
    last_error: bool  # the turn ended in an API error
    near_limit: bool  # a speculative turn would cross the compaction threshold


class Host(Protocol):
    """The session as the engine sees it: its configuration and what a fork is built from."""

    cfg: SessionConfig
    project: Path
    tools: list[Tool]
    spill_dir: Path
    session_id: str
    workspace: Workspace
    authorizer: MainAuthorizer  # a fork copies its rules; accepting asks through it, as live
    approve: ApproveFn | None  # the approval policy on acceptance; None: ask as the live path would
    events: EventLog
    hook_transcript: HookTranscript | None  # a fork's hooks get a fork of it

    def on_event(self, event: AgentEvent | Any) -> None: ...
