"""A study that measures what it says (issue #36, item 7): think time from when the prompt opened, blocked
randomization within each person, and a balance check before any saving, on a simulated study with a known
null effect (bench/study_null.py: nothing a person does depends on the arm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.study_null import write_study
from speculate.study import arms
from speculate.study.cli import format_report
from speculate.study.records import TurnRecord
from speculate.study.report import build_report, load


def test_arms_are_balanced_in_blocks() -> None:
    for seed in range(20):
        seq = arms.sequence(seed, 40)
        for k in range(0, 40, 4):  # every block of four holds each arm twice
            assert sorted(seq[k : k + 4]) == ["speculative"] * 2 + ["suggest"] * 2, (seed, seq)
        gaps = [abs(seq[:n].count("speculative") - seq[:n].count("suggest")) for n in range(41)]
        assert max(gaps) <= arms.BLOCK_PER_ARM
    three = arms.sequence(3, 30, ("speculative", "suggest", "plain"))
    assert all(three.count(a) == 10 for a in ("speculative", "suggest", "plain"))
    assert arms.sequence(3, 30) != arms.sequence(4, 30)  # still a function of the seed


def test_think_time_runs_from_when_the_prompt_opened() -> None:
    base: dict[str, Any] = {
        "session": "s",
        "turn": 2,
        "conversation_turn": 2,
        "arm": "suggest",
        "eligible": True,
        "ready_at": 0.0,
        "prompt": "p",
        "taken": "ignored",
        "latency_s": 3.0,
    }
    # The ghost text came at 4 s, after the first key at 2.5 s: no think time from the ghost, but 2.5 s from
    # when the prompt opened.
    late = TurnRecord.model_validate(
        {**base, "shown_s": 4.0, "first_key_s": 2.5, "submit_s": 6.0, "typing_s": 3.5}
    )
    assert (late.think_open_s, late.typing_open_s) == (2.5, 3.5)
    # The ghost text at once (after a taken fork): the same person, the same 2.5 s, whatever the ghost did.
    early = TurnRecord.model_validate(
        {**base, "shown_s": 0.0, "first_key_s": 2.5, "submit_s": 6.0, "think_s": 2.5}
    )
    assert early.think_open_s == late.think_open_s
    ahead = TurnRecord.model_validate({**base, "submit_s": 0.1, "typed_ahead": True})
    assert ahead.think_open_s is None and ahead.typing_open_s is None


@pytest.fixture(scope="module")
def null_study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: Path = tmp_path_factory.mktemp("null")
    write_study(out, people=8, sessions=3, turns=24, seed=0)
    return build_report(load(sorted(out.iterdir())), resamples=500)


def test_a_null_study_passes_its_balance_check(null_study: dict[str, Any]) -> None:
    b = null_study["balance"]
    assert b["passes"] is True
    for k in ("think_s", "typing_s"):
        lo, hi = b[k]["ci95"]
        assert lo <= 0 <= hi, (k, b[k])
        assert min(b[k]["n"].values()) > 200
    # Blocked within each session: a person's 3 sessions of 23 eligible turns stay within a few turns.
    assert max(p["gap"] for p in b["per_person"].values()) <= 3 * arms.BLOCK_PER_ARM
    # The report's timings use the same think time (from the prompt opening), not the ghost's.
    assert null_study["timings"]["suggest"]["think_s"]["n"] == b["think_s"]["n"]["suggest"]


def test_the_printed_report_shows_the_balance_check_before_any_saving(null_study: dict[str, Any]) -> None:
    text = format_report(null_study)
    assert "balance check (before any saving)" in text and "PASSES" in text
    assert text.index("balance check") < text.index("speculative vs suggest")
    assert "think, suggest minus speculative" in text and "typing, suggest minus speculative" in text
