"""The study report's arithmetic on a hand-computed study: two people, three sessions, every figure worked out
by hand below (not by the code under test), and the CLI reading the same files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from speculate.cli import main
from speculate.study.records import SessionEnd, SessionStart, TurnRecord
from speculate.study.report import build_report, load

# (session, turn, arm, eligible, suggestion, taken, typing_s, latency_s, cost_usd, engine_cost_usd, accepted,
#  speculation outcome, error)
ROWS: list[tuple[Any, ...]] = [
    ("s1", 1, "suggest", False, None, "none", 1.0, 9.0, 0.01, 0.0, False, None, ""),
    ("s1", 2, "speculative", True, "fix it now", "taken", 0.2, 1.0, 0.01, 0.02, True, "accepted", ""),
    ("s1", 3, "suggest", True, "run the tests", "taken", 0.2, 5.0, 0.03, 0.001, False, None, ""),
    (
        "s1",
        4,
        "speculative",
        True,
        "add a regression test for page two",
        "ignored",
        3.0,
        4.0,
        0.02,
        0.03,
        False,
        "aborted",
        "",
    ),
    ("s2", 1, "suggest", False, None, "none", 1.0, 9.0, 0.01, 0.0, False, None, ""),
    ("s2", 2, "suggest", True, "fix the other one", "edited", 1.0, 4.0, 0.02, 0.001, False, None, ""),
    ("s2", 3, "speculative", True, "run the tests", "taken", 0.1, 0.5, 0.0, 0.03, True, "accepted", ""),
    ("s3", 1, "speculative", False, None, "none", 1.0, 9.0, 0.01, 0.0, False, None, ""),
    ("s3", 2, "speculative", True, "fix it now", "taken", 0.3, 2.0, 0.01, 0.02, False, "conflict", ""),
    ("s3", 3, "suggest", True, "fix it now", "taken", 0.3, 6.0, 0.04, 0.001, False, None, ""),
    ("s3", 4, "suggest", True, None, "none", 2.0, 3.0, 0.02, 0.0, False, None, ""),
    (
        "s3",
        5,
        "speculative",
        True,
        "run the tests",
        "ignored",
        1.0,
        1.0,
        0.0,
        0.01,
        False,
        "aborted",
        "cancelled or failed before its end",
    ),
]
USERS = {"s1": "u1", "s2": "u1", "s3": "u2"}


def write_study(root: Path) -> list[Path]:
    """u1's directory holds s1 and s2, u2's holds s3."""
    dirs = {u: root / u for u in USERS.values()}
    for sess, user in USERS.items():
        path = dirs[user] / "sessions" / f"{sess}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        recs: list[Any] = [
            SessionStart(
                session=sess,
                user=user,
                seed=1,
                arms=["speculative", "suggest"],
                started=0.0,
                model="anthropic",
                model_name="claude-sonnet-4-6",
                frontend="prompt",
                edit_similarity={"after_tab": 0.5, "typed": 0.75},
            )
        ]
        for s, turn, arm, elig, sugg, taken, typing, lat, cost, eng, acc, spec, err in ROWS:
            if s != sess:
                continue
            recs.append(
                TurnRecord(
                    session=sess,
                    turn=turn,
                    conversation_turn=turn,
                    arm=arm,
                    eligible=elig,
                    ready_at=float(turn),
                    suggestion=sugg,
                    suggestion_source="model" if sugg else None,
                    shown_s=0.1 if sugg else None,
                    first_key_s=1.0,
                    submit_s=1.0 + typing,
                    prompt=sugg or "typed",
                    taken=taken,
                    think_s=0.9,
                    typing_s=typing,
                    ttft_s=0.1,
                    latency_s=lat,
                    accepted=acc,
                    cost_usd=cost,
                    engine_cost_usd=eng,
                    speculation={"outcome": spec} if spec else None,
                    error=err,
                )
            )
        recs.append(SessionEnd(session=sess, turns=len(recs) - 1, ended=1.0, trailing_engine_cost_usd=0.005))
        path.write_text("".join(r.model_dump_json() + "\n" for r in recs))
    return list(dirs.values())


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_report(load(write_study(tmp_path_factory.mktemp("study"))), resamples=500)


def test_counts_and_clusters(report: dict[str, Any]) -> None:
    assert (report["users"], report["sessions"], report["turns"]) == (2, 3, 12)
    assert report["eligible_turns"] == 9 and report["usable_turns"] == 8  # s3 t5 failed
    assert report["turns_by_arm"] == {"speculative": 5, "suggest": 4}
    assert report["simulated"] is False and report["time_scales"] == [1.0]


def test_saving_per_accepted_and_per_later_turn(report: dict[str, Any]) -> None:
    v = report["vs"]["suggest"]
    # Taken as-is, usable: speculative waits (typing + answer) 1.2, 0.6, 2.3 -> median 1.2; suggest 5.2, 6.3
    # -> median 5.75; saving 5.75 - 1.2 = 4.55. Answers alone: 1.0, 0.5, 2.0 -> 1.0; 5.0, 6.0 -> 5.5; 4.5.
    acc = v["saved_per_accepted_turn_s"]
    assert acc["n"] == {"suggest": 2, "speculative": 3}
    assert acc["median"] == pytest.approx({"suggest": 5.75, "speculative": 1.2})
    assert acc["difference"] == pytest.approx(4.55)
    assert v["saved_per_accepted_turn_answer_s"]["difference"] == pytest.approx(4.5)
    # Every usable turn: speculative waits 1.2, 7.0, 0.6, 2.3 -> mean 2.775; suggest 5.2, 5.0, 6.3, 5.0 ->
    # 5.375; saving 2.6. Answers: 1.875 and 4.5, saving 2.625.
    assert v["saved_per_later_turn_s"]["difference"] == pytest.approx(2.6)
    assert v["saved_per_later_turn_answer_s"]["mean"] == pytest.approx({"suggest": 4.5, "speculative": 1.875})
    assert v["saved_per_later_turn_answer_s"]["difference"] == pytest.approx(2.625)
    # Cost per usable turn: speculative 0.03, 0.05, 0.03, 0.03 -> 0.035; suggest 0.031, 0.021, 0.041, 0.02 ->
    # 0.02825; extra 0.00675 per turn, 0.00675 / 2.625 per second saved.
    assert v["extra_cost_per_turn_usd"]["difference"] == pytest.approx(0.00675)
    assert v["cost_per_second_saved_usd"] == pytest.approx(0.00675 / 2.625)
    for key in ("saved_per_later_turn_s", "saved_per_accepted_turn_s", "extra_cost_per_turn_usd"):
        lo, hi = v[key]["ci95"]
        assert lo <= hi


def test_acceptance_is_an_outcome_by_arm(report: dict[str, Any]) -> None:
    a = report["acceptance"]
    # Model suggestions shown on usable turns: speculative taken, ignored, taken, taken (3/4); suggest taken,
    # edited, taken (2/3; s3 t4 had none).
    assert a["speculative"]["taken"]["rate"] == pytest.approx(0.75) and a["speculative"]["taken"]["n"] == 4
    assert a["speculative"]["ignored"]["rate"] == pytest.approx(0.25)
    assert a["suggest"]["taken"]["rate"] == pytest.approx(2 / 3)
    assert a["suggest"]["edited"]["rate"] == pytest.approx(1 / 3)
    assert a["taken_difference"]["difference"] == pytest.approx(0.75 - 2 / 3)
    # The speculative arm's three usable turns taken as-is: two answered by the speculation, one conflict.
    assert report["speculation_used_share"] == pytest.approx(2 / 3)


def test_cost_and_harm(report: dict[str, Any]) -> None:
    c = report["cost"]
    # Eligible turns (the failed one too): speculative 0.03, 0.05, 0.03, 0.03, 0.01 -> 0.03.
    assert c["speculative"]["per_turn_usd"] == pytest.approx(0.03)
    assert c["speculative"]["engine_per_turn_usd"] == pytest.approx((0.02 + 0.03 + 0.03 + 0.02 + 0.01) / 5)
    assert c["suggest"]["per_turn_usd"] == pytest.approx((0.031 + 0.021 + 0.041 + 0.02) / 4)
    assert c["trailing_engine_usd"] == pytest.approx(0.015)
    h = report["harm"]
    # Not taken, usable: speculative answer 4.0; suggest 4.0 (edited) and 3.0 (none) -> 3.5; slower by 0.5.
    assert h["slower_when_not_taken_s"]["difference"] == pytest.approx(0.5)
    assert h["failed_or_cancelled"] == {
        "speculative": {"turns": 5, "failed": 1},
        "suggest": {"turns": 4, "failed": 0},
    }
    assert h["speculation_outcomes"] == {"aborted": 2, "accepted": 2, "conflict": 1}
    assert h["taken_but_not_used"] == {"turns": 1, "outcomes": {"conflict": 1}}


def test_acceptance_by_length_and_first_word(report: dict[str, Any]) -> None:
    by_len = report["by_length"]
    # 1-3 words: "fix it now" x3 and "run the tests" x2, all taken; "fix the other one" (4) edited; the
    # seven-word one ignored.
    assert list(by_len) == ["1-3", "4-6", "7-9"]
    assert (by_len["1-3"]["taken"]["n"], by_len["1-3"]["taken"]["rate"]) == (5, 1.0)
    assert (by_len["4-6"]["taken"]["rate"], by_len["4-6"]["edited_share"]) == (0.0, 1.0)
    assert by_len["7-9"]["taken"]["rate"] == 0.0
    words = report["by_first_word"]
    assert list(words) == ["fix", "run", "add"]  # by how often they came
    assert words["fix"]["taken"]["rate"] == pytest.approx(0.75) and words["fix"][
        "edited_share"
    ] == pytest.approx(0.25)
    assert words["run"]["taken"]["rate"] == 1.0


def test_one_session_has_no_ci_and_cli_reads_the_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = write_study(tmp_path)
    only_u2 = build_report(load([dirs[1]]), resamples=200)
    assert only_u2["vs"]["suggest"]["saved_per_later_turn_s"]["ci95"] is None  # one session: no variability
    assert (
        main(["study", "report", *map(str, dirs), "--resamples", "200", "--json", str(tmp_path / "r.json")])
        == 0
    )
    out = capsys.readouterr().out
    assert "2 people, 3 sessions, 12 turns" in out and "SIMULATED" not in out and "time scale" not in out
    assert "per later turn, wait (typing + answer):       +2.60 s [" in out
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["vs"]["suggest"]["saved_per_accepted_turn_s"]["difference"] == pytest.approx(4.55)
    # The same directory twice counts once.
    assert build_report(load([dirs[0], dirs[0]]), resamples=200)["sessions"] == 2


def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "report", str(tmp_path / "none")]) == 2
    assert f"{tmp_path / 'none'}: not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["study", "report", str(tmp_path / "empty")]) == 2
    assert "no study sessions" in capsys.readouterr().err
    d = write_study(tmp_path / "bad")[0]
    f = sorted((d / "sessions").glob("*.jsonl"))[0]
    lines = f.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "arm": "maybe"})
    f.write_text("\n".join(lines) + "\n")
    assert main(["study", "report", str(d)]) == 2
    assert f"{f}:3: turn.arm: Input should be" in capsys.readouterr().err


def test_a_contrast_left_undefined_on_resamples_is_dropped_or_refused() -> None:
    from speculate.statistics import hierarchical_bootstrap_ci
    from speculate.study.report import contrast

    stat = contrast(lambda xs: sum(xs) / len(xs), "b", "a")
    # One person: a session with both arms and one with b only; resamples drawing the latter twice have no a.
    groups = [[[("a", 1.0), ("b", 3.0)], [("b", 5.0)]]]
    ci = hierarchical_bootstrap_ci(groups, stat, n_resamples=400, seed=1, max_undefined=0.5)
    assert ci is not None and all(math.isfinite(x) for x in ci) and ci[0] <= ci[1]
    assert hierarchical_bootstrap_ci(groups, stat, n_resamples=400, seed=1, max_undefined=0.05) is None


def test_a_taken_demo_hint_is_left_out_of_the_saving_per_accepted_turn(tmp_path: Path) -> None:
    # A demo hint (no model suggestion: no fork could run) taken in the speculative arm says nothing of
    # speculation: it leaves the per-accepted-turn comparison, counted, and stays in the per-later-turn one.
    dirs = write_study(tmp_path)
    path = next(p for d in dirs for p in (d / "sessions").glob("*.jsonl") if "speculative" in p.read_text())
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("arm") == "speculative" and rec.get("taken") == "taken" and not rec.get("error"):
            lines[i] = json.dumps({**rec, "suggestion_source": "script", "fork_possible": False})
            break
    path.write_text("\n".join(lines) + "\n")
    v = build_report(load(dirs), resamples=200)["vs"]["suggest"]
    assert v["taken_without_a_fork"] == 1
    assert v["saved_per_accepted_turn_s"]["n"] == {"suggest": 2, "speculative": 2}
    assert v["saved_per_later_turn_s"]["n"] == {"suggest": 4, "speculative": 4}
