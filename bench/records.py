"""The bench's per-turn and per-session records as pydantic models: one schema for writing (the harness
validates each record before appending it) and reading (the report validates each JSONL line and names
``file:line`` on a bad one). Field meanings: docs/experiments.md, Output files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

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
    candidates_shown: list[str] | None = None  # top-K (K > 1): every candidate shown, the first is suggestion_shown
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


def load_records(path: Path, model: type[_Record]) -> list[dict[str, Any]]:
    """Validated records of a JSONL file ([] if absent); ValueError naming ``file:line`` on a bad one."""
    return _load(path, model.model_validate_json, model.__name__)


def _load(path: Path, validate: Callable[[bytes], BaseModel], what: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    # Bytes, so that a line that is not UTF-8 is named like any other bad line.
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        if line.strip():
            try:
                out.append(validate(line).model_dump())
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


_EVENT: TypeAdapter[BenchSuggestionEvent | BenchSpeculationEvent] = TypeAdapter(
    Annotated[BenchSuggestionEvent | BenchSpeculationEvent, Field(discriminator="kind")])


def load_events(path: Path) -> list[dict[str, Any]]:
    """events.jsonl validated with the engine's record schema ([] if absent); ValueError naming ``file:line``."""
    return _load(path, _EVENT.validate_json, "engine record")
