"""The suggestion and speculation records: what EventLog writes reads back equal through the one schema,
and ``speculate stats`` refuses a line that is not a record with ``FILE:LINE: reason`` and status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from pydantic import ValidationError

from speculate.speculation.events import (
    EventLog,
    RecordError,
    SpeculationRecord,
    SuggestionRecord,
    read_records,
    summarize_records,
)

from .conftest import engine_session, make_project


def _stats(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "speculate.cli", "stats", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_what_the_log_writes_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    sugg = SuggestionRecord(
        turn=1,
        outcome="accepted",
        text="fix it",
        generation_s=0.25,
        time_to_decision_s=1.5,
        tokens={"input_tokens": 7},
        cost_usd=0.001,
    )
    spec = SpeculationRecord(turn=1, suggestion="fix it", pipelined=True)
    spec.outcome, spec.boundary, spec.duration_s = "accepted", "complete", 2.0  # as the engine fills it in
    spec.hook_denials.append("Bash: no")
    spec.files_written = ["a.txt"]
    log.write(sugg)
    log.write(spec)
    assert read_records(path) == [sugg, spec]
    assert summarize_records(read_records(path)) == log.statistics()


def test_a_real_session_s_records_read_back_equal(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> list[SuggestionRecord | SpeculationRecord]:
        async with engine_session(root) as (s, _):
            await s.submit("look at a")
            assert await s.wait_suggestion() == "change alpha to gamma"
            await s.wait_speculation()
            assert (await s.submit("change alpha to gamma")).accepted
            return list(s.events.records)

    written = trio.run(main)
    assert {r.kind for r in written} == {"suggestion", "speculation"}
    assert read_records(root.parent / "events.jsonl") == written


def test_the_engine_cannot_put_a_wrong_type_in_a_record() -> None:
    rec = SpeculationRecord()
    with pytest.raises(ValidationError, match="tools_run"):
        rec.tools_run = "3"  # type: ignore[assignment]
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        SuggestionRecord(turn=1, colour="red")  # type: ignore[call-arg]


def test_records_of_an_older_run_without_the_newer_fields_still_read(tmp_path: Path) -> None:
    # The shape of the first records (before abort_s, bash, hooks_run, hook_denials, tokens_after_divergence).
    old = {
        "kind": "speculation",
        "turn": 0,
        "suggestion": "s",
        "outcome": "aborted",
        "reason": "typed",
        "boundary": "",
        "boundary_detail": "",
        "completed": False,
        "duration_s": 1.0,
        "time_to_accept_s": None,
        "time_saved_s": 0.0,
        "fork_start_s": 0.1,
        "overlay_create_s": 0.0,
        "promote_s": 0.0,
        "tools_run": 1,
        "files_written": [],
        "tokens": {"output_tokens": 5},
        "cost_usd": 0.5,
        "pipelined": False,
        "overlay_backend": "pure",
    }
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (rec,) = read_records(path)
    assert isinstance(rec, SpeculationRecord) and rec.tokens_after_divergence == 0 and rec.hook_denials == []
    r = _stats(path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["wasted_tokens"] == 5


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "Invalid JSON"),
        ('{"turn": 1}', "Unable to extract tag using discriminator 'kind'"),
        ('{"kind": "verdict"}', "does not match any of the expected tags"),
        ('{"kind": "speculation", "colour": "red"}', "speculation.colour: Extra inputs are not permitted"),
        ('{"kind": "suggestion", "turn": "3"}', "suggestion.turn: Input should be a valid integer"),
        ('{"kind": "speculation", "tokens": {"input_tokens": 1.5}}', "speculation.tokens.input_tokens:"),
        (b'{"kind": "suggestion", "text": "\xff"}', "Invalid JSON"),  # not UTF-8
    ],
)
def test_stats_names_the_file_and_line_of_a_bad_record(
    tmp_path: Path, line: str | bytes, reason: str
) -> None:
    path = tmp_path / "events.jsonl"
    good = SuggestionRecord(turn=0, outcome="ignored").model_dump_json().encode()
    path.write_bytes(
        good + b"\n\n" + (line if isinstance(line, bytes) else line.encode()) + b"\n" + good + b"\n"
    )
    with pytest.raises(RecordError) as e:
        read_records(path)
    assert e.value.line == 3 and reason in e.value.reason
    r = _stats(path)
    assert r.returncode == 2 and r.stdout == ""
    (err,) = r.stderr.splitlines()  # one line, no traceback
    assert err.startswith(f"speculate stats: error: {path}:3: ") and reason in err


def test_stats_on_a_missing_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    r = _stats(tmp_path / "absent.jsonl")
    assert r.returncode == 2 and r.stderr.startswith("speculate stats: error: cannot read ")
    assert "Traceback" not in r.stderr


def test_stats_shows_escape_sequences_in_records_as_text(tmp_path: Path) -> None:
    """Records hold untrusted text (a suggestion, a command, why the sandbox was off): ``speculate stats``
    never writes its escape sequences raw (issue #22, E4)."""
    import re

    seqs = "\x1b]52;c;aGk=\x07 \x1b]8;;http://evil/\x1b\\l\x1b]8;;\x1b\\ \x1b[2J \x1b]0;t\x07 \x9b2J"
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    spec = SpeculationRecord(turn=1, suggestion=f"run {seqs}", pipelined=False)
    spec.outcome, spec.boundary, spec.boundary_detail = "aborted", "bash", f"rm {seqs}"
    spec.bash = f"off (bwrap said {seqs})"
    log.write(spec)
    r = _stats(path)
    raw = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
    assert r.returncode == 0 and not raw.search(r.stdout + r.stderr), (r.stdout, r.stderr)
    assert "speculative Bash was off (bwrap said ^[]52;c;aGk=^G ^[]8;;http://evil/^[\\l" in r.stderr
    with path.open("a") as f:
        f.write(json.dumps({"kind": "speculation", "turn": f"1{seqs}"}) + "\n")
    r = _stats(path)
    assert r.returncode == 2 and not raw.search(r.stdout + r.stderr), r.stderr


def test_a_log_that_keeps_only_recent_records_still_counts_every_one(tmp_path: Path) -> None:
    # A long REPL session keeps the last records in memory; the statistics and since() must not notice.
    full, kept = EventLog(tmp_path / "a.jsonl"), EventLog(tmp_path / "b.jsonl", keep=3)
    recs = [
        SuggestionRecord(
            turn=i, outcome=("accepted", "ignored", "abstained", "suppressed")[i % 4], cost_usd=0.01
        )
        for i in range(20)
    ] + [SpeculationRecord(turn=i, outcome=("accepted", "aborted")[i % 2], cost_usd=0.1) for i in range(9)]
    mark = 0
    for n, r in enumerate(recs, 1):
        full.write(r)
        kept.write(r)
        if n == 25:
            mark = kept.written
    assert len(kept.records) <= 6 and kept.written == len(recs) == full.written
    whole = summarize_records(read_records(tmp_path / "b.jsonl"))
    for stats in (kept.statistics(), full.statistics()):
        assert stats.keys() == whole.keys()
        for k, v in whole.items():  # sums of costs added in another order: equal up to rounding
            assert stats[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    assert kept.since(mark) == recs[25:]
    with pytest.raises(ValueError, match="keep must be at least 1"):
        EventLog(keep=0)
