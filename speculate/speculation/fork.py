"""One speculative fork's state: its overlay, agent, authorizer and pending approvals, what it showed, its
timings and its record. The engine (:mod:`speculate.speculation.engine`) drives it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trio

from speculate.agent import Agent
from speculate.agent_types import AgentEvent
from speculate.hooks import HookRan
from speculate.models.base import Usage
from speculate.models.billing import Meter
from speculate.speculation import suggest
from speculate.speculation.approvals import Approvals
from speculate.speculation.authorize import SpecAuthorizer
from speculate.speculation.events import Boundary, SpeculationRecord


class Speculation:
    """One fork: its overlay, agent, timings and outcome."""

    def __init__(
        self, *, suggestion: str, prefix_len: int, turn: int, pipelined: bool, rank: int = 0
    ) -> None:
        self.suggestion = suggestion
        self.rank = rank  # top-K: which candidate it runs (0: the ghost text)
        self.scope = trio.CancelScope()  # its own, so one of K forks can be stopped while the others go on
        self.exited = trio.Event()  # its task is over (finished, stopped or cancelled): its overlay may go
        self.prefix_len = prefix_len
        self.started = time.perf_counter()
        self.finished = trio.Event()  # the fork stopped: complete, boundary or error
        self.finished_at: float | None = None
        self.next_ready = trio.Event()  # the pipelined suggestion is known (or will not come)
        self.next: suggest.SuggestionOutcome | None = None
        self.overlay: Any = None
        self.agent: Agent | None = None
        self.authorizer: SpecAuthorizer | None = None
        self.approvals: Approvals | None = None  # calls the live path would have asked about, run here
        self.renames: list[tuple[str, str]] | None = None  # (deleted, added) same content, once it finished
        self.usage = Usage()
        # Requests cut mid-stream (the fork thrown away, its pipelined suggestion abandoned): what the API bills.
        self.meter, self.next_meter = Meter(), Meter()
        self.last_usage: Usage | None = None  # of its last response: the context size after it (compaction)
        self.tools_run = 0
        self.requests = 0  # model requests it made (the policy's cost estimate learns from them)
        # What the fork showed so far (text, tool lines), replayed on acceptance; then ``live`` (the
        # session's event callback) hears the rest as it happens, as a normal turn streams.
        self.shown: list[AgentEvent] = []
        self.live: Callable[[AgentEvent], None] | None = None
        self.diverged_at_tokens: int | None = (
            None  # the fork's tokens when the user first typed off its prompt
        )
        self.record = SpeculationRecord(turn=turn, suggestion=suggestion, pipelined=pipelined)

    @property
    def complete(self) -> bool:
        return self.record.boundary == "complete"

    def stop(self, boundary: Boundary, detail: str = "") -> None:
        self.record.boundary, self.record.boundary_detail = boundary, detail

    def hook_ran(self, r: HookRan) -> None:
        """One of its hooks ran: counted, and a refusal or failure goes in the record."""
        self.record.hooks_run += 1
        if r.blocked and r.event == "PreToolUse":
            self.record.hook_denials.append(f"{r.tool}: {r.reason or r.command}")
        elif r.failed:  # the fork stops here (fail closed): what the hook said goes in the record
            self.record.hook_errors.append(
                f"{r.event} hook `{r.command}`: "
                + ("timed out" if r.timed_out else f"exit {r.exit_code}")
                + (f": {r.stderr.strip()}" if r.stderr.strip() else "")
            )
