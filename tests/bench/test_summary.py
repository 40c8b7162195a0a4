"""The summary figures on constructed per-turn, per-session and per-event records with known answers."""

from __future__ import annotations

from typing import Any

import pytest

from bench.compare import compare_markdown
from bench.pairs import Records
from bench.records import _EVENT, SessionRecord, TurnRecord
from bench.report import render_markdown
from bench.summary import build_summary

TOK = {
    "input_tokens": 10,
    "output_tokens": 20,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}


def turn(
    pair: str,
    arm: str,
    i: int,
    latency: float,
    *,
    accepted: bool = False,
    shown: str | None = None,
    think: float = 4.0,
    spec_dur: float | None = None,
) -> dict[str, Any]:
    spec = None
    if spec_dur is not None:
        spec = {"time_saved_s": min(spec_dur, think), "duration_s": spec_dur}
    return {
        "session": f"{pair}/{arm}",
        "pair": pair,
        "arm": arm,
        "turn": i,
        "latency_s": latency,
        "accepted": accepted,
        "suggestion_shown": shown,
        "input": "tab" if accepted else "typed",
        "think_s": think,
        "input_s": 0.0,
        "error": "",
        "tokens": dict(TOK),
        "speculation": spec,
    }


def session(
    pair: str, arm: str, wall: float, cost: float, *, leaks: int = 0, tree: str = "t", scenario: str = "a"
) -> dict[str, Any]:
    return {
        "session": f"{pair}/{arm}",
        "pair": pair,
        "arm": arm,
        "scenario": scenario,
        "cond": 0,
        "wall_s": wall,
        "cost_usd": cost,
        "turns": 3,
        "leaks": [{"turn": 1, "paths": ["x"]}] * leaks,
        "final_tree": tree,
    }


def spec_event(pair: str, outcome: str, boundary: str, *, read: int, fresh: int) -> dict[str, Any]:
    return {
        "session": f"{pair}/speculative",
        "arm": "speculative",
        "kind": "speculation",
        "outcome": outcome,
        "boundary": boundary,
        "completed": True,
        "duration_s": 2.0,
        "time_to_accept_s": 3.0,
        "fork_start_s": 0.01,
        "overlay_create_s": 0.002,
        "promote_s": 0.005,
        "cost_usd": 0.01,
        "tokens": {
            "input_tokens": fresh,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": read,
        },
    }


def sugg_event(pair: str, outcome: str) -> dict[str, Any]:
    return {
        "session": f"{pair}/speculative",
        "arm": "speculative",
        "kind": "suggestion",
        "outcome": outcome,
        "reason": "",
        "generation_s": 0.5,
        "cost_usd": 0.001,
        "tokens": dict(TOK),
    }


TURN = {
    "rep": 0,
    "seed": 0,
    "cond": 0,
    "condition": "c",
    "think_model": "fixed:4",
    "accept_prob": None,
    "model_name": "m",
    "prompt": "p",
    "suggestion_matched": False,
    "suggestion_at_submit": None,
    "note": "",
    "stop": None,
    "ttft_s": None,
    "requests": 1,
    "cost_usd": 0.0,
    "leak": [],
}
SESSION = {"rep": 0, "seed": 0, "condition": "c", "accepted": 0, "errors": 0}


def as_records(
    turns: list[dict[str, Any]], sessions: list[dict[str, Any]], events: list[dict[str, Any]]
) -> Records:
    """The dicts above as the validated records the summary reads (the fields they leave out defaulted)."""
    scn = {s["pair"]: s["scenario"] for s in sessions}
    return Records(
        [TurnRecord.model_validate({**TURN, "scenario": scn.get(t["pair"], "a"), **t}) for t in turns],
        [SessionRecord.model_validate({**SESSION, **s}) for s in sessions],
        [_EVENT.validate_python(e) for e in events],
    )


def summarize(
    turns: list[dict[str, Any]],
    sessions: list[dict[str, Any]],
    events: list[dict[str, Any]],
    meta: dict[str, Any] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    return build_summary(records=as_records(turns, sessions, events), meta=meta or META, **kw)


def records() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    turns, sessions, events = [], [], []
    # Pair A: turn 1 accepted (saves 3 s of 5), turn 2 suggestion ignored (0.2 s slower).
    # Pair B: turn 1 accepted (saves 1 s of 4), turn 2 no suggestion.
    for pair, (p1, s1, d1), ign in (("A", (5.0, 2.0, 2.0), True), ("B", (4.0, 3.0, 8.0), False)):
        turns += [
            turn(pair, "plain", 0, 1.0),
            turn(pair, "speculative", 0, 1.0),
            turn(pair, "plain", 1, p1),
            turn(pair, "speculative", 1, s1, accepted=True, shown="go", spec_dur=d1),
            turn(pair, "plain", 2, 2.0),
            turn(pair, "speculative", 2, 2.2 if ign else 2.0, shown="other" if ign else None),
        ]
        sessions += [
            session(pair, "plain", 20.0, 0.03),
            session(pair, "speculative", 16.0, 0.05, tree="t" if pair == "A" else "u"),
        ]
        events += [sugg_event(pair, "accepted"), spec_event(pair, "accepted", "complete", read=90, fresh=10)]
        if ign:
            events += [sugg_event(pair, "ignored"), spec_event(pair, "aborted", "edit", read=80, fresh=20)]
    return turns, sessions, events


META = {
    "run_id": "test",
    "backend": "sim",
    "seed": 0,
    "time_scale": 1.0,
    "reps": 1,
    "concurrency": 2,
    "cpus": 2,
    "scenarios": ["a"],
    "conditions": ["fixed:4 natural m"],
    "condition_params": [{"think_fixed_s": 4.0, "accept_prob": None}],
    "run": {"wall_s": 40.0, "interrupted": False, "sessions": 4, "failures": []},
}


def test_summary_figures_on_constructed_records() -> None:
    turns, sessions, events = records()
    s = summarize(turns, sessions, events)
    assert s["arms"]["plain"]["turn_latency_s"]["p50"] == pytest.approx(2.0)
    assert s["arms"]["speculative"]["session_wall_s"]["p50"] == 16.0
    assert s["accepted"] == 2
    assert s["suggestion_coverage"] == pytest.approx(3 / 4)  # later turns with a suggestion shown
    assert s["acceptance_rate"] == pytest.approx(2 / 3)
    assert s["time_saved_s"]["n"] == 2
    assert s["time_saved_s"]["median"] == pytest.approx(2.0)  # savings 3 and 1
    assert s["time_saved_s"]["ci95"] == [pytest.approx(1.0), pytest.approx(3.0)]
    # Savings 3 (capped at its ideal 2: no fork saves more than it ran) + 1 over ideals min(2, 4) + min(8, 4).
    assert s["efficiency"]["pooled"] == pytest.approx(3 / 6)
    assert s["latency_diff_per_turn_s"]["mean"] == pytest.approx((3 - 0.2 + 1 + 0) / 4)
    assert s["fork_cache_read_share"] == pytest.approx(260 / 300)
    assert s["wasted_tokens"] == 105  # the aborted fork's 20 + 80 + 5
    assert s["boundaries"] == {"complete": 2, "edit": 1}
    assert s["cost_usd"] == {"plain": pytest.approx(0.06), "speculative": pytest.approx(0.10)}
    assert s["cost_per_second_saved_usd"] == pytest.approx(0.04 / 3.8)
    assert s["session_wall_reduction"] == pytest.approx(1 - 32 / 40)
    assert s["leaks"] == 0
    assert s["tree_divergence"] == ["B"]
    assert s["break_even_think_model_s"] == pytest.approx(0.5 + 0.01 + 0.005)
    assert s["backend"] == "sim" and s["seed"] == 0


def test_leaks_are_counted_and_reported() -> None:
    turns, sessions, events = records()
    sessions[1]["leaks"] = [{"turn": 1, "when": "before submit", "paths": ["src/x.py"]}]
    s = summarize(turns, sessions, events, canary_leaks=["ws/a.py"])
    assert s["leaks"] == 2
    assert {"canary": "ws/a.py"} in s["leak_details"]
    assert "Leaks into a real tree outside acceptance: **2**" in render_markdown(s)


def test_report_and_compare_render_the_figures() -> None:
    turns, sessions, events = records()
    s = summarize(turns, sessions, events)
    md = render_markdown(s)
    assert "| turn latency p50 (s) | 2.00 | 2.00 | +0% |" in md
    assert (
        "| submit-to-answer latency saved per accepted turn vs plain, median [95% CI] (s) | 2.00 [1.00, 3.00] |"
        in md
    )
    assert "boundary: edit | 1" in md
    b = {**s, "accepted": 5, "acceptance_rate": 0.9}
    cmp = compare_markdown(s, b, "A", "B")
    assert "| accepted | 2 | 5 | +3 |" in cmp
    assert "| acceptance rate | 67% | 90% | +23 pp |" in cmp


def test_a_suggestion_that_appeared_while_typing_counts_as_offered() -> None:
    turns, sessions, events = records()
    late = next(t for t in turns if t["pair"] == "B" and t["arm"] == "speculative" and t["turn"] == 2)
    late["suggestion_at_submit"] = "something else"  # arrived during typing, differed from what was typed
    s = summarize(turns, sessions, events)
    assert s["suggestion_coverage"] == 1.0
    assert s["acceptance_rate"] == pytest.approx(2 / 4)


def three_arm_records() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """records() plus a suggest arm that took the same suggestions with Tab but had no fork, and a plain arm
    that typed for 3 s before each later turn."""
    turns, sessions, events = records()
    for t in turns:
        if t["turn"] > 0:
            t["input_s"] = 0.2 if t["accepted"] else 3.0
    for pair, p1 in (("A", 5.0), ("B", 4.0)):
        turns += [
            turn(pair, "suggest", 0, 1.0),
            {**turn(pair, "suggest", 1, p1, accepted=True), "input_s": 0.2},
            {**turn(pair, "suggest", 2, 2.0), "input_s": 3.0},
        ]
        sessions.append(session(pair, "suggest", 18.0, 0.035))
    return turns, sessions, events


def test_speculative_is_compared_with_suggest_and_with_plain() -> None:
    turns, sessions, events = three_arm_records()
    s = summarize(turns, sessions, events)
    assert set(s["arms"]) == {"plain", "suggest", "speculative"}
    vs_s, vs_p = s["vs"]["suggest"], s["vs"]["plain"]
    # Against suggest, Tab is on both sides: only the fork's saving is left (3 and 1 s).
    assert vs_s["saved_per_accepted_turn_s"]["median"] == pytest.approx(2.0)
    assert vs_s["saved_per_later_turn_s"]["mean"] == pytest.approx((3 + 1 - 0.2 + 0) / 4)
    # Against plain, typing (3 s) vs Tab (0.2 s) is added: 5.8 and 3.8.
    assert vs_p["saved_per_accepted_turn_s"]["median"] == pytest.approx(4.8)
    assert vs_p["saved_per_accepted_turn_s"]["ci95"] == [pytest.approx(3.8), pytest.approx(5.8)]
    assert vs_s["slower_turns"] == {
        "n": 1,
        "share": pytest.approx(0.25),
        "median_s": pytest.approx(0.2),
        "max_s": pytest.approx(0.2),
    }
    assert vs_s["session_wall_reduction"] == pytest.approx(1 - 32 / 36)
    assert s["suggest_vs_plain"]["saved_per_accepted_turn_s"]["median"] == pytest.approx(2.8)
    assert s["efficiency"]["pooled"] <= 1.0
    md = render_markdown(s)
    assert "speculative vs suggest" in md and "speculative vs plain" in md


def test_compare_refuses_runs_with_different_settings_unless_forced(tmp_path, capsys) -> None:
    from bench.compare import compare_main

    turns, sessions, events = records()
    s = summarize(turns, sessions, events)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    import json

    a.write_text(json.dumps(s))
    b.write_text(json.dumps({**s, "time_scale": 0.2}))
    assert compare_main(a, b) == 2
    assert "time_scale: 1.0 vs 0.2" in capsys.readouterr().err
    assert compare_main(a, b, force=True) == 0
    out = capsys.readouterr().out
    assert "Settings differ" in out and "| time saved median (s) | 2 [1, 3] | 2 [1, 3] |" in out


def test_saving_vs_acceptance_plots_each_condition_and_marks_the_natural_rate(tmp_path) -> None:
    from bench.plots import saving_vs_acceptance

    def block(rate: float, prob: float | None, mean: float) -> dict[str, Any]:
        later = {"mean": mean, "ci95": [mean - 0.1, mean + 0.1]}
        return {
            "acceptance_rate": rate,
            "accept_prob": prob,
            "vs": {"suggest": {"saved_per_later_turn_s": later}, "plain": {"saved_per_later_turn_s": later}},
        }

    s = {
        "time_scale": 0.2,
        "conditions_detail": [block(0.8, None, 0.6), block(0.0, 0.0, -0.1), block(1.0, 1.0, 0.9)],
    }
    assert saving_vs_acceptance(s, tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert not saving_vs_acceptance({"conditions_detail": [block(0.8, None, 0.6)]}, tmp_path / "b.png")


def test_fork_cost_compares_a_used_fork_with_one_thrown_away() -> None:
    turns, sessions, events = records()
    for e in events:
        if e["kind"] == "speculation" and e["outcome"] == "aborted":
            e.update(reason="typed", cost_usd=0.008, completed=False)
    events.append({**spec_event("B", "aborted", "complete", read=10, fresh=1), "reason": "shutdown"})
    s = summarize(turns, sessions, events)
    fc = s["fork_cost"]
    assert fc["hit"]["n"] == 2 and fc["hit"]["mean_usd"] == pytest.approx(0.01)
    # Only a fork thrown away because the user typed their own prompt is a miss (not one cut at shutdown).
    assert fc["miss"]["n"] == 1 and fc["miss"]["mean_usd"] == pytest.approx(0.008)
    assert fc["miss_to_hit"] == pytest.approx(0.8) and fc["miss_completed"]["n"] == 0
    assert (
        "| fork cost per hit / per miss (ratio); misses that had finished | $0.0100 (n=2) / $0.0080 (n=1) (80%)"
        in render_markdown(s)
    )


def test_every_ci_is_hierarchical_with_the_pair_level_one_beside_it() -> None:
    turns, sessions, events = records()
    s = summarize(turns, sessions, events)
    later = s["vs"]["plain"]["saved_per_later_turn_s"]
    assert s["vs"]["plain"]["scenarios"] == 1 and s["vs"]["plain"]["clusters"] == 2
    assert later["ci95"] is not None and later["ci95_pairs"] is not None  # one scenario: the reps resampled
    assert "two-stage: scenarios" in s["ci_method"]
    assert "scenarios / pairs" in render_markdown(s) and "1 / 2" in render_markdown(s)
