"""The bench's per-turn and per-session records as pydantic models: one schema for writing (the harness
validates each record before appending it) and reading (the report validates each JSONL line and names
``file:line`` on a bad one). Field meanings: docs/experiments.md, Output files."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from speculate.speculation.events import SpeculationRecord, SuggestionRecord, validation_reason


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _SessionKey(_Record):
    """Which session of the run a record belongs to: its pair, arm, scenario, rep and condition."""

    session: str
    pair: str
    arm: Literal["plain", "suggest", "speculative"]
    scenario: str
    rep: int
    seed: int
    cond: int
    condition: str


class TurnRecord(_SessionKey):
    think_model: str
    accept_prob: float | None
    model_name: str
    turn: int
    prompt: str
    miss_kind: str | None = None  # forced hit rate: the wrong suggestion's kind (speculate.sim.draw)
    think_s: float
    input_s: float
    input: Literal["tab", "typed"]
    suggestion_scripted: str | None = None  # the candidate drawn for this session (what the sim offers)
    suggestion_shown: str | None
    suggestion_matched: bool
    suggestion_at_submit: str | None
    accepted: bool
    latency_s: float
    error: str
    unmet_expectations: list[str] = []
    # The wrong suggestion's fork before this turn (a miss): its tool results checked against the candidate's
    # steps like the main turn's (bench/forkcheck.py); how many were checked. Unmet ones are turn errors too.
    fork_checked: int = 0
    # What the replay verified (bench/expect.py tally): tool results, those an expectation checked, and the
    # unchecked ones that were errors. None in records written before #36.
    expect_tally: dict[str, int] | None = None
    note: str
    fallback: bool = False
    stop: str | None
    ttft_s: float | None
    requests: int
    tokens: dict[str, Any]
    cost_usd: float
    speculation: SpeculationRecord | None  # the engine's record, its schema
    leak: list[str]
    user_edit: str | None = None
    candidates_shown: list[str] | None = (
        None  # top-K (K > 1): every candidate shown, the first is suggestion_shown
    )
    candidate_rank: int | None = None  # the candidate the user sent (0: the ghost text), None: they typed


class SessionRecord(_SessionKey):
    wall_s: float
    turns: int
    accepted: int
    errors: int
    leaks: list[dict[str, Any]]
    final_tree: str
    cost_usd: float
    statistics: Any = None


R = TypeVar("R", bound=BaseModel)


def load_records(path: Path, model: type[R]) -> list[R]:
    """Validated records of a JSONL file ([] if absent); ValueError naming ``file:line`` on a bad one."""
    return _load(path, model.model_validate_json, model.__name__)


def _load(path: Path, validate: Callable[[bytes], R], what: str) -> list[R]:
    """A JSONL file, or its gzipped copy (``NAME.gz``, as a kept headline holds them) when it is absent."""
    gz = path.with_name(path.name + ".gz")
    if not path.exists() and gz.exists():
        data, path = gzip.decompress(gz.read_bytes()), gz
    elif path.exists():
        data = path.read_bytes()
    else:
        return []
    out: list[R] = []
    # Bytes, so that a line that is not UTF-8 is named like any other bad line.
    for n, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                out.append(validate(line))
            except ValidationError as e:
                raise ValueError(f"{path}:{n}: not a valid {what}: {validation_reason(e)}") from None
    return out


class BenchSuggestionEvent(SuggestionRecord):
    """An engine record in events.jsonl, with the session and arm it came from."""

    session: str
    arm: Literal["plain", "suggest", "speculative"]


class BenchSpeculationEvent(SpeculationRecord):
    session: str
    arm: Literal["plain", "suggest", "speculative"]


BenchEvent = BenchSuggestionEvent | BenchSpeculationEvent
_EVENT: TypeAdapter[BenchEvent] = TypeAdapter(Annotated[BenchEvent, Field(discriminator="kind")])


def load_events(path: Path) -> list[BenchEvent]:
    """events.jsonl validated with the engine's record schema ([] if absent); ValueError naming ``file:line``."""
    return _load(path, _EVENT.validate_json, "engine record")


def dicts(records: Sequence[BaseModel]) -> list[dict[str, Any]]:
    """Validated records as plain dicts (for code that reads them by field name, as JSON)."""
    return [r.model_dump() for r in records]
