"""Reports that do not overstate (issue #36, item 6), on constructed records with known answers: a condition
that never showed what it varies says so, one suggestion is one record, acceptance is the user's choice with
the policy's abstentions beside it, and slowdowns count above a stated threshold with the noise floor."""

from __future__ import annotations

from typing import Any

import pytest

from bench.report import render_markdown
from tests.bench.test_summary import META, session, spec_event, sugg_event, summarize, turn


def two_arm_run(*, k: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Pair A: turn 1 accepted (a fork, 3 s saved); turn 2 ignored, its fork aborted with its pipelined next
    suggestion discarded (an empty record), 0.02 s slower (noise); turn 3 abstained and sent anyway (run
    live, 0.3 s slower); turn 4 typed, no suggestion, 0.04 s apart (the noise floor)."""
    turns = [turn("A", arm, 0, 1.0) for arm in ("suggest", "speculative")]
    for i, (base, spec, accepted, shown, dur) in enumerate(
        [(5.0, 2.0, True, "go", 2.0), (2.0, 2.02, False, "other", 1.0), (3.0, 3.3, False, "x", None)], 1
    ):
        turns += [
            turn("A", "suggest", i, base, accepted=accepted, shown=shown),
            turn("A", "speculative", i, spec, accepted=accepted, shown=shown, spec_dur=dur),
        ]
    turns += [turn("A", "suggest", 4, 2.0), turn("A", "speculative", 4, 2.04)]
    turns[-3]["input"] = turns[-4]["input"] = "tab"  # turn 3: the user took the abstained suggestion
    # A plain arm, as the report has one: the suggest arm's turns, typed.
    turns += [
        {**t, "session": "A/plain", "arm": "plain", "accepted": False, "input": "typed"} for t in turns[::2]
    ]
    sessions = [session("A", arm, 20.0, 0.03) for arm in ("plain", "suggest")]
    sessions.append(session("A", "speculative", 16.0, 0.05))
    cands = ["other", "go"] if k > 1 else []
    events = [
        {**sugg_event("A", "accepted"), "turn": 0, "chosen": 0, "text": "go", "candidates": []},
        spec_event("A", "accepted", "complete", read=90, fresh=10),
        {**sugg_event("A", "ignored"), "turn": 1, "text": "other", "candidates": cands},
        spec_event("A", "aborted", "complete", read=80, fresh=20),
        {**sugg_event("A", "discarded"), "turn": 1, "text": "", "pipelined": True, "cost_usd": 0.002},
        {
            **sugg_event("A", "abstained"),
            "turn": 2,
            "text": "x",
            "chosen": 0,
            "decisions": [
                {
                    "text": "x",
                    "p_accept": 0.1,
                    "expected_saving_s": 3.0,
                    "expected_cost_usd": 0.01,
                    "fork": False,
                }
            ],
        },
    ]
    return turns, sessions, events


def meta(k: int = 1, value: float | None = None) -> dict[str, Any]:
    label = "natural" + (f" K={k}" if k > 1 else "") + (f" λ={value:g}" if value is not None else "")
    return {
        **META,
        "conditions": [label],
        "condition_params": [{"accept_prob": None, "spec_k": k, "spec_value": value}],
    }


def test_one_suggestion_one_record_and_acceptance_is_the_users_choice() -> None:
    s = summarize(*two_arm_run(), meta())
    h = s["honest"]
    assert h["suggestions"]["shown"] == 3  # not 4: the discarded pipelined record is no suggestion
    assert h["suggestions"]["records"] == 4
    assert h["suggestions"]["not_shown"]["discarded_with_fork"] == 1
    assert h["suggestions"]["not_shown"]["discarded_with_fork_cost_usd"] == pytest.approx(0.002)
    a = h["acceptance"]
    # The user sent 2 of 3 (the accepted one and the abstained one); the policy abstained on 1, 1 fork landed.
    assert (a["sent_by_user"], a["shown"], a["abstained"], a["abstained_then_sent"], a["fork_landed"]) == (
        2,
        3,
        1,
        1,
        1,
    )
    md = render_markdown(s)
    assert (
        "The user sent 2 of 3 suggestions shown (67%); the policy abstained on 1 of them (1 sent anyway" in md
    )


def test_slowdowns_count_above_the_threshold_beside_the_noise_floor() -> None:
    s = summarize(*two_arm_run(), meta())
    slow = s["honest"]["slower"]["suggest"]
    # 0.3 s slower counts; 0.02 s and 0.04 s do not (the old figure counted three).
    assert s["vs"]["suggest"]["slower_turns"]["n"] == 3
    assert slow["n"] == 1 and slow["max_s"] == pytest.approx(0.3)
    assert slow["within_threshold"] == 2
    # The noise floor: turns where the speculative arm typed and ran no fork (turn 4, 0.04 s apart).
    assert slow["noise_floor"]["n"] == 1 and slow["noise_floor"]["max_abs_s"] == pytest.approx(0.04)
    md = render_markdown(s)
    assert "turns slower than base by > 50 ms; noise floor" in md
    assert "1 (25%), max 0.30 s; floor 0.04 s (n=1)" in md


def test_a_top_k_condition_that_never_offered_a_second_candidate_says_so() -> None:
    s = summarize(*two_arm_run(k=1), meta(k=2))
    assert (
        s["conditions_detail"][0]["honest"]["condition"]["note"] == "K=2: 0 turns offered a second candidate"
    )
    assert "natural K=2: K=2: 0 turns offered a second candidate**" in render_markdown(s)
    # With a second candidate shown on one turn, the condition showed what it varies: no note.
    s2 = summarize(*two_arm_run(k=2), meta(k=2))
    c = s2["conditions_detail"][0]["honest"]["condition"]
    assert c["shown"] == 1 and c["note"] is None


def test_a_lambda_condition_counts_the_candidates_it_declined() -> None:
    s = summarize(*two_arm_run(), meta(value=0.01))
    c = s["honest"]["condition"]
    assert (c["varies"], c["shown"], c["note"]) == ("λ=0.01", 1, None)


def test_acceptance_of_scenarios_imported_without_prompt_source_is_reported_unknown() -> None:
    # An imported transcript without promptSource cannot say which prompts were taken suggestions: the
    # report says its acceptance is no measurement rather than showing the 0 % the typed reading gives.
    m = {**meta(), "scenarios": ["imported-a", "bundled-b"], "acceptance_unknown": ["imported-a"]}
    md = render_markdown(summarize(*two_arm_run(), m))
    assert "**Acceptance unknown** for 1 of 2 scenarios (imported-a)" in md
    assert "Acceptance unknown" not in render_markdown(summarize(*two_arm_run(), meta()))
