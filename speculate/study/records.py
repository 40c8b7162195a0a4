"""The records a study session writes, one JSONL file per REPL run under ``DIR/sessions/``: a header, the
arm of each turn as it is drawn, one record per turn, and an end record. One schema for writing and
reading (a bad line is named ``file:line``). Times of a turn are seconds on one monotonic clock from the
moment its prompt was ready (the previous answer ended); field meanings: docs/study.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from speculate.errors import SpeculateError
from speculate.speculation.events import validation_reason
from speculate.study.arms import Arm
from speculate.study.classify import Taken

SCHEMA = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SessionStart(_Record):
    kind: Literal["session"] = "session"
    schema_version: int = SCHEMA
    session: str  # this REPL run's id
    user: str  # the study directory's participant id (DIR/consent.json)
    seed: int
    arms: list[Arm]
    started: float  # Unix time
    model: str  # backend: sim | anthropic | claude-cli
    model_name: str
    frontend: Literal["prompt", "plain", "api"]  # api: a program driving the session (the simulated user)
    # The simulator's speed (0.1: ten times real time; 1.0 for a real model): every time in the session's
    # records is a wall-clock second, so a simulated session's seconds are model seconds times this.
    time_scale: float = 1.0
    edit_similarity: dict[str, float]  # the thresholds that classified edits (speculate.study.classify)


class Assignment(_Record):
    kind: Literal["assign"] = "assign"
    session: str
    turn: int  # the turn it is for (1-based in this run, across /clear)
    arm: Arm
    seed: int
    draw: int  # 1-based: the how-many-th draw of random.Random(seed)
    after_turn: int  # the turn that had just ended when it was drawn (0: at the start)
    at: float  # Unix time


class SpeculationSummary(_Record):
    """What became of the speculation of the cycle before the turn (the engine's record, abridged)."""

    outcome: str
    reason: str = ""
    boundary: str = ""
    completed: bool = False
    duration_s: float = 0.0
    time_saved_s: float = 0.0
    tools_run: int = 0


class TurnRecord(_Record):
    kind: Literal["turn"] = "turn"
    session: str
    turn: int
    conversation_turn: int  # the session's own count (restarts at /clear)
    arm: Arm
    # A cycle (suggestion, and in the speculative arm a fork) would have run before this turn whatever its
    # arm: the previous turn of this conversation ended cleanly. Independent of the arm, so comparing
    # eligible turns across arms is a comparison of randomized groups.
    eligible: bool
    ready_at: float  # Unix time the prompt was ready
    suggestion: str | None = None  # the last ghost text shown before sending
    suggestion_source: Literal["model", "script"] | None = None  # script: the demo's, not the model's
    shown_s: float | None = None  # when that ghost text first appeared
    first_key_s: float | None = None  # first keystroke that changed the line (None: line mode, type-ahead)
    took_ghost: bool = False  # Tab (or Right) took the ghost text
    ghost_taken_s: float | None = None
    submit_s: float  # Enter
    typed_ahead: bool = False  # keys were typed during the previous turn: no think or typing time
    commands: int = 0  # slash commands run while the prompt was open
    prompt: str
    taken: Taken
    similarity: float | None = None
    # shown -> first keystroke (None when the first key came before the ghost): depends on when the ghost
    # text came, so on the previous turn's arm, and is missing when it came late. The report uses
    # think_open_s instead.
    think_s: float | None = None
    typing_s: float | None = None  # first keystroke -> Enter
    ttft_s: float | None = None  # Enter -> first token of the answer
    latency_s: float  # Enter -> end of the answer
    questions: int = 0  # permission or approval questions put to the person during the turn
    question_s: float = 0.0  # the time they took to answer them (part of latency_s)
    accepted: bool = False  # the speculation answered (part of) the turn
    tokens: dict[str, int] = {}  # the main turn's
    cost_usd: float = 0.0  # the main turn's
    engine_tokens: dict[str, int] = {}  # the suggestion and fork of the cycle before this turn
    engine_cost_usd: float = 0.0
    suggestion_outcome: str = ""  # the engine's record of the model's suggestion (accepted, ignored, ...)
    # Whether a fork could have run before this turn: only for the model's own suggestion. A demo hint
    # (suggestion_source "script") or no ghost text at all means no fork whatever the arm: such a turn of
    # the speculative arm did not get speculation, and is marked so (the arm stays the drawn one).
    fork_possible: bool = True
    speculation: SpeculationSummary | None = None
    error: str = ""
    note: str = ""

    @property
    def cost_total_usd(self) -> float:
        return self.cost_usd + self.engine_cost_usd

    @property
    def think_open_s(self) -> float | None:
        """Think time from when the prompt opened (the previous answer ended) to the person's first key,
        Tab included; None when they typed ahead (no think time) or no key was recorded. It does not depend
        on when, or whether, the ghost text appeared."""
        return None if self.typed_ahead else self.first_key_s

    @property
    def typing_open_s(self) -> float | None:
        """The first key to Enter (typing, or Tab and Enter)."""
        return None if self.think_open_s is None else self.submit_s - self.think_open_s

    @property
    def wait_s(self) -> float | None:
        """What the person waited for after starting to enter the prompt: typing (or Tab) and the answer."""
        return None if self.typing_s is None else self.typing_s + self.latency_s


class SessionEnd(_Record):
    kind: Literal["end"] = "end"
    session: str
    turns: int
    ended: float  # Unix time
    # The last cycle, never decided (the run ended first): its suggestion and fork, billed all the same.
    trailing_engine_cost_usd: float = 0.0
    trailing_engine_tokens: dict[str, int] = {}


StudyRecord = Annotated[SessionStart | Assignment | TurnRecord | SessionEnd, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[SessionStart | Assignment | TurnRecord | SessionEnd] = TypeAdapter(StudyRecord)


class StudyFileError(SpeculateError, ValueError):
    """A study file that cannot be used; ``str()`` names ``file:line`` and why."""


@dataclass
class StudySession:
    """One study file, validated: its header, assignments, turns and (if it ended cleanly) end record."""

    path: Path
    start: SessionStart
    assignments: list[Assignment] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    end: SessionEnd | None = None


def read_session(path: Path) -> StudySession:
    """Validate every line of ``path``; the first must be the header. A run killed mid-write leaves at most a
    cut last line, which is skipped (its turn was not finished)."""
    lines = path.read_bytes().splitlines()
    recs: list[Any] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            recs.append(_ADAPTER.validate_json(line))
        except ValidationError as e:
            if n == len(lines) and not line.endswith(b"}"):
                break  # a last line cut by a kill
            raise StudyFileError(f"{path}:{n}: {validation_reason(e)}") from None
    if not recs or not isinstance(recs[0], SessionStart):
        raise StudyFileError(
            f"{path}:1: not a study session file (its first record must be the session header)"
        )
    out = StudySession(path, recs[0])
    for r in recs[1:]:
        if isinstance(r, SessionStart):
            raise StudyFileError(f"{path}: a second session header (one file per session)")
        if r.session != out.start.session:
            raise StudyFileError(
                f"{path}: a record of session {r.session!r} in session {out.start.session!r}'s file"
            )
        if isinstance(r, Assignment):
            out.assignments.append(r)
        elif isinstance(r, TurnRecord):
            out.turns.append(r)
        else:
            out.end = r
    return out


def session_files(study_dir: Path) -> list[Path]:
    """The session files of a study directory; ValueError naming it when it is not one."""
    if not study_dir.is_dir():
        raise StudyFileError(f"{study_dir}: not a directory")
    files = sorted((study_dir / "sessions").glob("*.jsonl"))
    if not files:
        raise StudyFileError(
            f"{study_dir}: no study sessions (expected {study_dir / 'sessions'}/*.jsonl, "
            "written by `speculate repl --study DIR`)"
        )
    return files
