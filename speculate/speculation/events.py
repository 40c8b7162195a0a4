"""What the engine tells the outside: state changes (for the REPL's toolbar and the benchmark) and the
per-suggestion / per-speculation records written as JSONL (``speculate stats`` summarises them)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from speculate.agent_types import BoundaryKind
from speculate.errors import SpeculateError

# How a fork ended: its turn completed, a boundary before a call, one of its bounds, or accepted while running
# with accept_running="stop".
# budget: one of the top-K forks of a cycle, stopped when their shared token budget ran out (lowest rank first).
Boundary = Literal["complete", "max_turns", "max_messages", "interrupted", "budget"] | BoundaryKind
# What became of a speculation (SpeculationRecord.outcome) and of a suggestion (SuggestionRecord.outcome).
# declined: taken, but the calls it ran that the live path would have asked about were not approved.
SpecOutcome = Literal["accepted", "aborted", "error", "conflict", "declined"]
# abstained: shown, but the policy forked none of its candidates (speculate.speculation.policy); `chosen` says
# whether the user then sent it anyway (it ran live).
# The answer to the approval question on acceptance ("" when nothing needed approval).
Approval = Literal["approved", "always", "declined"]
SuggestionOutcome = Literal["accepted", "ignored", "suppressed", "filtered", "discarded", "abstained"]
Unset = Literal[""]  # a record written before its outcome is known

State = Literal[
    "idle",  # nothing in flight
    "generating",  # the suggestion request is running
    "speculating",  # the fork is running on the overlay
    "ready",  # the fork completed its turn: accepting is instant
    "boundary",  # the fork stopped at a boundary: accepting promotes the part done, then goes on
    "accepted",
    "aborted",
]


@dataclass(frozen=True)
class SpecEvent:
    """A state change. ``detail`` carries: suggestion, tools_run, elapsed_s, boundary, boundary_detail."""

    state: State
    suggestion: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.perf_counter)


class _Record(BaseModel):
    # One schema for writing (EventLog.write) and reading (read_records, ``speculate stats``): unknown fields
    # and wrong types are refused rather than coerced ("3" is no turn), and the engine's updates of a record
    # as it goes are checked too. Fields added later need defaults, so older files stay readable.
    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)


class Decision(_Record):
    """The policy's numbers for one candidate, and whether it forked (speculate.speculation.policy)."""

    text: str
    rank: int = 0
    p_accept: float
    p_land: float | None = None  # P(accept) · P(lands | accept), what the rule weighs (None: before #36)
    expected_saving_s: float
    expected_cost_usd: float  # the whole fork's; the rule weighs it by (1 - p_accept)
    value: float | None = None  # λ, dollars per second saved; None: always fork
    fork: bool
    features: dict[str, str] = {}


class SuggestionRecord(_Record):
    kind: Literal["suggestion"] = "suggestion"
    turn: int = 0
    outcome: SuggestionOutcome | Unset = ""  # discarded: pipelined, its fork never used
    reason: str = ""  # why suppressed / filtered
    text: str = ""  # the first candidate (the ghost text)
    candidates: list[str] = []  # top-K: every candidate shown, first included (empty: just `text`)
    chosen: int | None = None  # the candidate the user sent (accepted, or abstained and run live)
    decisions: list[Decision] = []  # the policy's estimate and decision per candidate
    generation_s: float = 0.0
    time_to_decision_s: float | None = None
    pipelined: bool = False
    tokens: dict[str, int] = {}
    cost_usd: float = 0.0


class SpeculationRecord(_Record):
    kind: Literal["speculation"] = "speculation"
    turn: int = 0
    suggestion: str = ""
    outcome: SpecOutcome | Unset = ""
    reason: str = ""
    boundary: Boundary | Unset = ""
    boundary_detail: str = ""
    completed: bool = False  # the fork had finished (complete or boundary) when accepted/aborted
    duration_s: float = 0.0  # start -> finished (or -> abort)
    time_to_accept_s: float | None = None
    time_saved_s: float = 0.0  # min(accept time, completion time) - start
    fork_start_s: float = 0.0  # speculation start -> fork's first request sent
    overlay_create_s: float = 0.0
    promote_s: float = 0.0
    abort_s: float | None = None  # ignore() called -> fork cancelled and overlay discarded (aborted only)
    tools_run: int = 0
    requests: int = 0  # model requests the fork made
    files_written: list[str] = []  # promoted: files and links added or modified
    files_deleted: list[str] = []  # promoted deletions (a directory once, as "dir/")
    files_renamed: list[str] = []  # "old -> new": a deletion and an addition with the same content
    tokens: dict[str, int] = {}
    cost_usd: float = 0.0
    pipelined: bool = False
    overlay_backend: str = "pure"
    bash: str = ""  # how speculative Bash ran: "sandboxed (...)" or "off (why)"
    hooks_run: int = 0  # the user's hooks the fork ran (in its sandbox)
    hook_denials: list[str] = []  # PreToolUse refusals inside the fork: "tool: reason"
    hook_errors: list[
        str
    ] = []  # hooks that failed in the fork (it stopped there): "event hook `cmd` ...: stderr"
    # Calls the live path would have asked about, run in the sandbox: "Bash(rm -rf build): deleted build/".
    approvals: list[str] = []
    approval: Approval | Unset = ""  # the answer on acceptance
    # Tokens the fork spent after the user typed off its prompt (kept, not aborted): the "keep" policy's cost.
    tokens_after_divergence: int = 0


EngineRecord = Annotated[SuggestionRecord | SpeculationRecord, Field(discriminator="kind")]
_ENGINE_RECORD: TypeAdapter[SuggestionRecord | SpeculationRecord] = TypeAdapter(EngineRecord)


class RecordError(SpeculateError, ValueError):
    """A line of an events file that is not a record: ``str()`` is one line, ``FILE:LINE: reason``."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path, self.line, self.reason = path, line, reason


class EventLog:
    """Append-only JSONL of records; the statistics of every record written, and the records themselves in
    memory: all of them, or with ``keep`` the last ``keep`` (a long REPL session; the file keeps them all).
    What trimming drops is folded into the statistics first, so ``statistics()`` counts every record."""

    def __init__(self, path: Path | None = None, *, keep: int | None = None) -> None:
        if keep is not None and keep < 1:
            raise ValueError(f"EventLog keep must be at least 1, not {keep}")
        self.path = path
        self.keep = keep
        self.records: list[SuggestionRecord | SpeculationRecord] = []
        self.written = 0  # records written so far: an offset that trimming does not move (see since())
        self._folded: dict[str, Any] | None = None  # the statistics of the records trimmed away

    def write(self, rec: SuggestionRecord | SpeculationRecord) -> None:
        self.records.append(rec)
        self.written += 1
        if self.keep is not None and len(self.records) > 2 * self.keep:  # trim in batches: amortised O(1)
            drop, self.records = self.records[: -self.keep], self.records[-self.keep :]
            self._folded = merge_summaries(self._folded, summarize_records(drop))
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(rec.model_dump_json() + "\n")

    def since(self, n: int) -> list[SuggestionRecord | SpeculationRecord]:
        """The records written after the first ``n`` (an earlier ``written``) that are still kept."""
        first_kept = self.written - len(self.records)
        return self.records[max(0, n - first_kept) :]

    def statistics(self) -> dict[str, Any]:
        return merge_summaries(self._folded, summarize_records(self.records))


def read_records(path: Path) -> list[SuggestionRecord | SpeculationRecord]:
    """The validated records of an events file (blank lines skipped). OSError if it cannot be read;
    :class:`RecordError` naming ``path:line`` and why for the first line that is not JSON or not a record."""
    out: list[SuggestionRecord | SpeculationRecord] = []
    # Bytes, so that a line that is not UTF-8 is named like any other bad line.
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(_ENGINE_RECORD.validate_json(line))
        except ValidationError as e:
            raise RecordError(path, n, validation_reason(e)) from None
    return out


def validation_reason(e: ValidationError) -> str:
    """Pydantic's errors on one line: ``field: message`` for each (the kind first, for a record's field)."""
    return "; ".join(
        f"{'.'.join(map(str, err['loc']))}: {err['msg']}" if err["loc"] else err["msg"]
        for err in e.errors(include_url=False)
    )


def summarize_records(recs: Sequence[SuggestionRecord | SpeculationRecord]) -> dict[str, Any]:
    """Acceptance, outcomes, boundaries, time saved and tokens wasted from validated records."""
    sugg = [r for r in recs if isinstance(r, SuggestionRecord)]
    spec = [r for r in recs if isinstance(r, SpeculationRecord)]
    shown = [r for r in sugg if r.outcome in ("accepted", "ignored", "abstained")]
    accepted = [r for r in spec if r.outcome == "accepted"]
    wasted = sum(sum(r.tokens.values()) for r in spec if r.outcome != "accepted")
    out: dict[str, Any] = {
        "suggestions": len(sugg),
        "suggestions_shown": len(shown),
        "suggestion_outcomes": _count(r.outcome for r in sugg),
        "suppressed_reasons": _count(r.reason for r in sugg if r.outcome in ("suppressed", "filtered")),
        "wasted_suggestion_tokens": sum(sum(r.tokens.values()) for r in sugg if r.outcome != "accepted"),
        # Taken: the user sent a candidate, whether a fork answered it (accepted) or it ran live (abstained).
        "suggestions_taken": (taken := sum(r.chosen is not None or r.outcome == "accepted" for r in shown)),
        "acceptance_rate": taken / len(shown) if shown else 0.0,
        "abstained": sum(r.outcome == "abstained" for r in sugg),
        "abstained_taken": sum(r.outcome == "abstained" and r.chosen is not None for r in sugg),
        "speculations": len(spec),
        "speculation_outcomes": _count(r.outcome for r in spec),
        "boundaries": _count(r.boundary for r in spec if r.boundary),
        "approvals": _count(r.approval for r in spec if r.approval),
        "time_saved_s": sum(r.time_saved_s for r in accepted),
        "wasted_tokens": wasted,
        "tokens_after_divergence": sum(r.tokens_after_divergence for r in spec),
        "wasted_cost_usd": sum(r.cost_usd for r in spec if r.outcome != "accepted")
        + sum(r.cost_usd for r in sugg if r.outcome != "accepted"),
        "cost_usd": sum(r.cost_usd for r in recs),
        # The two spends apart (the REPL's /stats): generating suggestions, and running forks.
        "suggestion_cost_usd": sum(r.cost_usd for r in sugg),
        "speculation_cost_usd": sum(r.cost_usd for r in spec),
        "wasted_speculation_cost_usd": sum(r.cost_usd for r in spec if r.outcome != "accepted"),
        # Said once, however many speculations ran: whether speculative Bash was contained, or why it was off.
        "speculative_bash": sorted({r.bash for r in spec} - {""}),
    }
    return out


def merge_summaries(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """The :func:`summarize_records` of two record lists joined, from the two summaries: counts and sums
    add, count tables add key by key, the acceptance rate is taken again, the Bash notes are joined."""
    if a is None:
        return b
    out: dict[str, Any] = {}
    for k, v in b.items():
        if isinstance(v, dict):
            out[k] = {key: a[k].get(key, 0) + b[k].get(key, 0) for key in {**a[k], **v}}
        elif isinstance(v, list):
            out[k] = sorted(set(a[k]) | set(v))
        else:
            out[k] = a[k] + v
    shown = out["suggestions_shown"]
    out["acceptance_rate"] = out["suggestions_taken"] / shown if shown else 0.0
    return out


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out
