"""Records: what the harness writes validates against the schema the report reads; a bad line is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.records import TurnRecord, load_events, load_records


def test_a_bad_line_is_named_with_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "turns.jsonl"
    p.write_text("\n" + json.dumps({"session": "x", "arm": "fork"}) + "\n")
    with pytest.raises(ValueError, match=r"turns\.jsonl:2: not a valid TurnRecord"):
        load_records(p, TurnRecord)
    assert load_records(tmp_path / "absent.jsonl", TurnRecord) == []


def _turn(speculation: object) -> dict[str, object]:
    return {
        "session": "s",
        "pair": "p",
        "arm": "speculative",
        "scenario": "x",
        "rep": 0,
        "seed": 1,
        "cond": 0,
        "condition": "c",
        "think_model": "fixed",
        "accept_prob": None,
        "model_name": "m",
        "turn": 0,
        "prompt": "hi",
        "think_s": 1.0,
        "input_s": 0.1,
        "input": "tab",
        "suggestion_shown": "hi",
        "suggestion_matched": True,
        "suggestion_at_submit": "hi",
        "accepted": True,
        "latency_s": 0.5,
        "error": "",
        "note": "",
        "stop": None,
        "ttft_s": None,
        "requests": 0,
        "tokens": {},
        "cost_usd": 0.0,
        "speculation": speculation,
        "leak": [],
    }


def test_a_turn_s_speculation_is_the_engine_s_record(tmp_path: Path) -> None:
    p = tmp_path / "turns.jsonl"
    p.write_text(
        json.dumps(_turn({"kind": "speculation", "outcome": "accepted", "time_saved_s": 2}))
        + "\n"
        + json.dumps(_turn(None))
        + "\n"
    )
    spec, none = (r.speculation for r in load_records(p, TurnRecord))
    assert none is None and spec is not None
    assert spec.time_saved_s == 2.0 and spec.tokens_after_divergence == 0  # defaults
    p.write_text(json.dumps(_turn({"kind": "speculation", "time_saved": 2})) + "\n")  # a misspelt field
    with pytest.raises(
        ValueError,
        match=r"^\S*turns\.jsonl:1: not a valid TurnRecord: speculation\.time_saved: Extra inputs are not permitted$",
    ):
        load_records(p, TurnRecord)


def test_events_are_validated_with_the_engine_schema(tmp_path: Path) -> None:
    p = tmp_path / "events.jsonl"
    good = {"kind": "speculation", "session": "s", "arm": "speculative", "outcome": "aborted"}
    p.write_text(
        json.dumps(good) + "\n" + json.dumps({"kind": "suggestion", "session": "s", "arm": "suggest"}) + "\n"
    )
    spec, sugg = load_events(p)
    assert spec.outcome == "aborted" and spec.tokens == {} and sugg.kind == "suggestion"
    p.write_text(json.dumps(good) + "\n" + json.dumps({**good, "arm": "fork"}) + "\n")
    with pytest.raises(ValueError, match=r"events\.jsonl:2: not a valid engine record: speculation\.arm"):
        load_events(p)
    p.write_text(json.dumps({k: v for k, v in good.items() if k != "session"}) + "\n")
    with pytest.raises(ValueError, match=r"events\.jsonl:1: .*session: Field required"):
        load_events(p)
