"""The speculation policy out of sample (issue #36, item 4): P(lands) learns from taken forks that did not
land, and the leave-one-scenario-out λ frontier of bench/policy_cv.py is reproduced on a small subset of a
kept run (tests/bench/data/policy_cv: 4 scenarios × 3 reps of the default headline run at commit 7b7553a),
figure for figure as docs/experiments.md reports it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import policy_cv
from bench.pairs import paired_turns, user_saving
from bench.policy_history import history
from bench.report import load_run
from speculate.speculation.events import Decision
from speculate.speculation.landing import boundary_of
from speculate.speculation.policy import Features, SpecPolicy

DATA = Path(__file__).parent / "data" / "policy_cv"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"
BEGIN, END = "<!-- policy-cv-subset -->", "<!-- /policy-cv-subset -->"


def test_the_predicted_boundary() -> None:
    assert boundary_of("commit this") == "protected"
    assert boundary_of("push it") == "protected" and boundary_of("open a PR for it") == "protected"
    assert boundary_of("run `git commit -am wip`") == "protected"  # the shell parser reads the command
    assert boundary_of("echo x > .git/config") == "protected"  # a write under .git/
    assert boundary_of("git log --oneline") == "none"  # git that writes nothing
    assert boundary_of("explain the tag filter") == "none"
    assert boundary_of("add a test for restock") == "none"


def test_taken_forks_that_did_not_land_lower_p_lands() -> None:
    f = Features(
        rank=0,
        prev="none",
        tools="Edit",
        context="<8k",
        first_word="commit",
        length="2-4",
        boundary="protected",
    )
    g = Features(rank=0, prev="none", tools="Edit", context="<8k", first_word="add", length="2-4")
    pol = SpecPolicy(value=0.01)
    p0, land0 = pol.p_lands(f)
    assert land0 == pytest.approx(p0 * 0.2)  # the protected boundary's prior, Beta(1, 4)
    assert pol.p_lands(g)[1] == pytest.approx(pol.p_lands(g)[0] * 0.8)  # none: Beta(4, 1)
    d = pol.decision(g, "add a test", saving_s=3.0, cost_usd=0.01)
    for _ in range(3):  # "add ..." taken three times, its fork never used (say it conflicted)
        pol.observe_choice([d], 0, time_to_decision_s=2.0)
        pol.observe_turn(latency_s=4.0, time_saved_s=None)
    assert pol.land.counts["boundary=none|first=add"] == [0, 3]
    assert pol.p_lands(g)[1] < 0.5 * pol.p_lands(g)[0]
    # A decision the policy did not fork teaches nothing about landing.
    declined = Decision.model_validate({**d.model_dump(), "fork": False})
    pol.observe_choice([declined], 0, time_to_decision_s=2.0)
    pol.observe_turn(latency_s=4.0, time_saved_s=None)
    assert pol.land.counts["boundary=none|first=add"] == [0, 3]
    # The counts are part of the persisted state.
    again = SpecPolicy()
    again.load_state(pol.state())
    assert again.land.counts == pol.land.counts


def test_the_held_out_scenario_is_not_in_its_priors() -> None:
    full = history(DATA, None)
    for name in ("explain-codebase", "node-fix-overdue"):
        cv = history(DATA, None, exclude=(name,))
        own = history(DATA, None, scenarios={name})
        n = {
            k: sum(c[0] + c[1] for key, c in s["counts"].items() if key.count("|") == 0)
            for k, s in (("full", full), ("cv", cv), ("own", own))
        }
        assert n["cv"] + n["own"] == n["full"] and n["own"] > 0


def test_always_forking_replays_as_the_run_was() -> None:
    rows = policy_cv.evaluate(DATA, values=())
    r = load_run(DATA)
    pairs = [(b, a) for b, a in paired_turns(r.turns, "suggest") if a.turn > 0]
    assert rows[0]["spec_value"] is None
    assert rows[0]["saving_s"] == pytest.approx(sum(user_saving(b, a) for b, a in pairs) / len(pairs))
    spec = sum(s.cost_usd for s in r.sessions if s.arm == "speculative")
    base = sum(s.cost_usd for s in r.sessions if s.arm == "suggest")
    assert rows[0]["cost_over_suggest"] == pytest.approx(spec / base - 1)


def test_the_cross_validated_frontier_on_a_subset_is_the_one_documented() -> None:
    rows = policy_cv.evaluate(DATA, values=(0.001, 0.003, 0.01))
    text = DOCS.read_text(encoding="utf-8")
    documented = text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()
    assert policy_cv.table(rows) == documented
    by = {(r["fit"], r["spec_value"]): r for r in rows}
    # Out of sample the policy does worse than the in-sample fit promised (the priors saw the scenario).
    assert by[("cv", 0.003)]["cost_over_suggest"] > by[("in-sample", 0.003)]["cost_over_suggest"]
    # P(lands) forks fewer taken suggestions that then did not land than P(accept) alone.
    assert by[("cv", 0.01)]["forked_sent_not_landed"] < by[("cv-accept", 0.01)]["forked_sent_not_landed"]
