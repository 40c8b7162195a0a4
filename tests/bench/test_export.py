"""``speculate bench export``: one row per turn, as CSV (no dependency) and Parquet (pyarrow), from a results
directory or a kept headline's gzipped records."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.export import COLUMNS, export
from bench.records import _EVENT, SessionRecord, TurnRecord
from speculate.cli import main

from .test_summary import META, SESSION, TURN, records


def run_dir(tmp_path: Path) -> Path:
    """A results directory written from the summary tests' constructed records."""
    turns, sessions, events = records()
    for e in events:  # the turn each was made for: the accepted ones before turn 1, the ignored before 2
        e["turn"] = 1 if e["outcome"] == "accepted" else 2
    d = tmp_path / "run"
    d.mkdir()
    scn = {s["pair"]: s["scenario"] for s in sessions}
    (d / "turns.jsonl").write_text(
        "".join(
            TurnRecord.model_validate({**TURN, "scenario": scn[t["pair"]], **t}).model_dump_json() + "\n"
            for t in turns
        )
    )
    (d / "sessions.jsonl").write_text(
        "".join(SessionRecord.model_validate({**SESSION, **s}).model_dump_json() + "\n" for s in sessions)
    )
    (d / "events.jsonl").write_text(
        "".join(json.dumps(_EVENT.validate_python(e).model_dump()) + "\n" for e in events)
    )
    (d / "summary.json").write_text(
        json.dumps({**META, "condition_params": [{"typing_cps": 5.0, "tab_s": 0.2, "sim": "ideal"}]})
    )
    return d


def check(data: list[dict[str, Any]]) -> None:
    turns, _, events = records()
    assert len(data) == len(turns)  # one row per turn of every arm
    by = {(r["session"], int(r["turn"])): r for r in data}
    spec = by["A/speculative", 1]
    assert spec["arm"] == "speculative" and spec["scenario"] == "a" and spec["outcome"] == "accepted"
    assert by["A/speculative", 2]["outcome"] == "miss"  # shown "other", typed its own prompt
    assert (
        by["B/speculative", 2]["outcome"] == "no_suggestion" and by["A/plain", 0]["outcome"] == "first_turn"
    )
    assert float(spec["latency_s"]) == 2.0 and float(spec["typing_cps"]) == 5.0
    # The engine's spending for the turn is on its row: the total adds up to turns plus events.
    total = sum(float(r["total_cost_usd"]) for r in data)
    assert total == pytest.approx(
        sum(float(r["cost_usd"]) for r in data) + sum(e["cost_usd"] for e in events)
    )
    assert float(spec["fork_cost_usd"]) == pytest.approx(0.01) and float(spec["suggestion_cost_usd"]) == 0.001


def test_csv_has_one_row_per_turn_with_every_column(tmp_path: Path) -> None:
    d = run_dir(tmp_path)
    path = export(d, "csv")
    assert path == d / "turns.csv"
    with path.open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == [c for c, _ in COLUMNS]
        check(list(reader))


def test_parquet_is_typed_and_matches_the_csv(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="the parquet export needs pyarrow (the export extra)")
    d = run_dir(tmp_path)
    table = pq.read_table(export(d, "parquet"))
    assert table.column_names == [c for c, _ in COLUMNS]
    assert (
        str(table.schema.field("latency_s").type) == "double"
        and str(table.schema.field("rep").type) == "int64"
    )
    assert str(table.schema.field("accepted").type) == "bool"
    check(table.to_pylist())


def test_a_kept_headline_with_gzipped_records_exports_too(tmp_path: Path) -> None:
    d = run_dir(tmp_path)
    kept = tmp_path / "kept"
    kept.mkdir()
    shutil.copy(d / "summary.json", kept / "summary.json")
    for name in ("turns.jsonl", "sessions.jsonl", "events.jsonl"):
        (kept / f"{name}.gz").write_bytes(gzip.compress((d / name).read_bytes()))
    out = tmp_path / "x.csv"
    assert main(["bench", "export", str(kept), "--format", "csv", "--out", str(out)]) == 0
    with out.open() as f:
        check(list(csv.DictReader(f)))


def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "export", str(tmp_path / "nope"), "--format", "csv"]) == 2
    assert "nope: not a results directory" in capsys.readouterr().err
    assert main(["bench", "export", str(run_dir(tmp_path)), "--format", "xlsx"]) == 2
    assert "--format 'xlsx': expected parquet or csv" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["bench", "export", str(empty), "--format", "csv"]) == 2
    assert "no turns.jsonl" in capsys.readouterr().err
