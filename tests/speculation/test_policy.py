"""Cost-aware abstention: the estimator's arithmetic on hand-computed cases, the decision rule on both sides
of its threshold, and the engine abstaining (ghost text shown, accepting runs live) on the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from speculate.models.base import Usage
from speculate.settings import SettingsError, load_settings
from speculate.speculation.events import SuggestionRecord, summarize_records
from speculate.speculation.policy import (
    BetaBackoff,
    Features,
    ForkCost,
    MeanEstimate,
    SpecPolicy,
    policy_path,
    should_fork,
)

from .conftest import engine_session, make_project, tree_hash

F = Features(rank=0, prev="accepted", tools="Read", context="<8k", first_word="run", length="2-4")


def test_beta_backoff_pools_each_key_toward_its_parent_mean() -> None:
    keys = F.keys()
    b = BetaBackoff(prior=(1.0, 1.0), pooling=2.0)
    assert b.p_accept(keys) == pytest.approx(0.5)  # nothing seen: the prior's mean
    b.counts = {keys[0]: [3, 1], keys[1]: [1, 1], keys[3]: [0, 2]}
    # rank: Beta(1+3, 1+1) -> 4/6; prev: (2·4/6 + 1)/(2 + 2) = 7/12; tools·ctx unseen: 7/12;
    # first·len: (2·7/12 + 0)/(2 + 2) = 7/24
    assert b.p_accept(keys) == pytest.approx(7 / 24)
    b.observe(keys, True)  # every level counts it
    assert b.counts[keys[2]] == [1, 0] and b.counts[keys[3]] == [1, 2]
    # rank 5/7; prev (10/7 + 2)/5 = 24/35; tools·ctx (48/35 + 1)/3 = 83/105; first·len (166/105 + 1)/5
    assert b.p_accept(keys) == pytest.approx((166 / 105 + 1) / 5)


def test_a_key_never_seen_gives_the_coarser_estimate() -> None:
    b = BetaBackoff(prior=(2.0, 6.0), pooling=4.0)
    b.counts = {F.keys()[0]: [2, 0]}
    other = Features(rank=0, prev="none", tools="Bash", context="8-32k", first_word="push", length="1")
    assert b.p_accept(other.keys()) == pytest.approx(4 / 10)  # only the rank level has data
    with pytest.raises(ValueError, match="prior"):
        BetaBackoff(prior=(0.0, 1.0))


def test_fork_cost_prices_the_prefix_as_cache_reads_and_learns_from_forks() -> None:
    c = ForkCost()
    c.requests, c.written, c.output = MeanEstimate(2.0), MeanEstimate(1000.0), MeanEstimate(100.0)
    # claude-sonnet-4-6: input $3, output $15, cache write $3.75, cache read $0.30 per MTok.
    # Reads: 2·10,000 + 1,100·2·1/2 = 21,100 tokens at $0.30; writes 2·1,000 at $3.75; output 2·100 at $15.
    want = (21_100 * 0.30 + 2_000 * 3.75 + 200 * 15.0) / 1e6
    assert c.estimate("claude-sonnet-4-6", 10_000) == pytest.approx(want)
    # Below the cacheable minimum (1,024 tokens) nothing is read from the cache: the prefix at the input rate.
    small = (2 * 500 + 1_100) * 3.0 + 2_000 * 3.75 + 200 * 15.0
    assert c.estimate("claude-sonnet-4-6", 500) == pytest.approx(small / 1e6)
    assert c.estimate("no-such-model", 10_000) == 0.0
    c.observe(
        4,
        Usage(input_tokens=0, output_tokens=400, cache_creation_input_tokens=2000, cache_read_input_tokens=9),
    )
    assert c.requests.value == pytest.approx((1 * 2.0 + 4) / 2)  # the prior weighs one fork
    assert c.written.value == pytest.approx((1000 + 500) / 2) and c.output.value == pytest.approx(
        (100 + 100) / 2
    )


def test_the_rule_forks_on_one_side_of_the_threshold_only() -> None:
    # value·P·S > (1-P)·C with P 0.25, S 2 s, C $0.01: the threshold is value = 0.75·0.01/(0.25·2) = 0.015.
    assert should_fork(p=0.25, saving_s=2.0, cost_usd=0.01, value=0.016)
    assert not should_fork(p=0.25, saving_s=2.0, cost_usd=0.01, value=0.014)
    assert should_fork(p=0.01, saving_s=0.1, cost_usd=1.0, value=None)  # no dial: always
    assert should_fork(p=0.01, saving_s=0.1, cost_usd=1.0, value=float("inf"))
    assert not should_fork(p=0.9, saving_s=5.0, cost_usd=0.001, value=0.0)  # λ 0: never


def test_a_miss_lowers_p_and_turns_the_decision() -> None:
    pol = SpecPolicy(value=0.006, model_name="claude-sonnet-4-6")
    msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    (d,) = pol.decide(["run the tests"], messages=msgs, context_tokens=3000)
    assert d.p_accept == pytest.approx(0.5) and d.fork  # 0.006·0.5·3 = 0.009 > 0.5·0.0109
    assert d.expected_saving_s == pytest.approx(3.0) and d.features["length"] == "2-4"
    # 3 requests on 3,000 tokens: reads 9,000 + 400·3 at $0.30, writes 900 at $3.75, output 300 at $15
    assert d.expected_cost_usd == pytest.approx((10_200 * 0.30 + 900 * 3.75 + 300 * 15.0) / 1e6)
    pol.observe_choice([d], None, time_to_decision_s=1.0)
    pol.new_cycle()
    pol.observe_turn(latency_s=2.0, time_saved_s=None)  # a right fork would have saved min(2.0, 1.0)
    assert pol.saving.value == pytest.approx((3.0 + 1.0) / 2)
    (d2,) = pol.decide(["run the tests"], messages=msgs, context_tokens=3000)
    assert d2.features["prev"] == "ignored" and d2.p_accept == pytest.approx(1 / 3)
    assert not d2.fork  # 0.006·(1/3)·2 = 0.004 < (2/3)·0.0109


def test_history_round_trips(tmp_path: Path) -> None:
    pol = SpecPolicy()
    pol.beta.observe(F.keys(), True)
    pol.saving.observe(1.5)
    path = tmp_path / "p.json"
    pol.save(path)
    again = SpecPolicy()
    again.load(path)
    assert again.beta.counts == pol.beta.counts and again.saving.value == pytest.approx(pol.saving.value)
    again.load(tmp_path / "missing.json")  # no history: unchanged, no error
    assert again.beta.counts == pol.beta.counts


def test_settings_carry_the_policy_and_refuse_bad_values(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"speculation": {"value": 0.01, "candidates": 2, "budget": {"tokens": 5000}}})
    )
    (root / ".claude" / "settings.local.json").write_text(json.dumps({"speculation": {"value": 0.02}}))
    s = load_settings(root, user=tmp_path / "user")
    assert s.policy.value == 0.02 and s.policy.candidates == 2 and s.policy.budget.tokens == 5000
    (root / ".claude" / "settings.local.json").write_text(json.dumps({"speculation": {"candidates": 9}}))
    with pytest.raises(SettingsError, match=r"speculation\.candidates"):
        load_settings(root, user=tmp_path / "user")


def test_stats_count_abstentions_and_what_the_user_did() -> None:
    recs = [
        SuggestionRecord(outcome="abstained", chosen=0),
        SuggestionRecord(outcome="abstained"),
        SuggestionRecord(outcome="accepted", chosen=0),
        SuggestionRecord(outcome="ignored"),
    ]
    out = summarize_records(recs)
    assert out["abstained"] == 2 and out["abstained_taken"] == 1
    assert out["acceptance_rate"] == pytest.approx(2 / 4)


def test_the_engine_abstains_shows_the_ghost_text_and_runs_it_live(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> None:
        async with engine_session(root, spec_value=0.0) as (s, _):  # λ 0: no saving is worth a dollar
            await s.submit("look at a")
            assert await s.wait_suggestion() == "change alpha to gamma"  # ghost text all the same
            await s.wait_speculation()
            assert s.engine._spec is None and not s.engine.forks.forks
            before = tree_hash(root)
            out = await s.submit("change alpha to gamma")
            assert not out.accepted and out.result is not None  # it ran live
            assert (root / "a.txt").read_text() == "gamma\n" and tree_hash(root) != before
            assert not [r for r in s.events.records if r.kind == "speculation"]
            (rec, *_) = [r for r in s.events.records if r.kind == "suggestion"]
            assert rec.outcome == "abstained" and rec.chosen == 0
            (d,) = rec.decisions
            assert not d.fork and d.value == 0.0 and 0 < d.p_accept < 1
            assert d.expected_saving_s > 0 and d.expected_cost_usd > 0
            assert s.statistics()["abstained_taken"] == 1

    trio.run(main)


def test_without_a_value_every_suggestion_forks_and_the_estimate_is_recorded(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> None:
        async with engine_session(root) as (s, _):
            await s.submit("look at a")
            await s.wait_suggestion()
            await s.wait_speculation()
            out = await s.submit("change alpha to gamma")
            assert out.accepted
            (rec, *_) = [r for r in s.events.records if r.kind == "suggestion"]
            assert rec.outcome == "accepted" and rec.chosen == 0
            assert rec.decisions[0].fork and rec.decisions[0].value is None
            (spec,) = [r for r in s.events.records if r.kind == "speculation"]
            assert spec.requests == 2  # Edit, then the answer; the cost estimate learned from the whole fork
            assert s.engine.policy.cost.requests.n == 1 and s.engine.policy.cost.requests.value == 2.5

    trio.run(main)


def test_a_persisted_history_is_kept_per_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECULATE_STATE_DIR", str(tmp_path / "state"))
    root = make_project(tmp_path)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(json.dumps({"speculation": {"persist": True}}))

    async def session(prompt: str) -> dict:
        async with engine_session(root) as (s, _):
            await s.submit("look at a")
            await s.wait_suggestion()
            await s.submit(prompt)
            return s.engine.policy.state()

    first = trio.run(session, "something else entirely")
    path = policy_path(root)
    assert json.loads(path.read_text())["counts"] == first["counts"]
    assert first["counts"]["rank=0"] == [0, 1]
    second = trio.run(session, "change alpha to gamma")
    assert second["counts"]["rank=0"] == [1, 1]  # started from the first session's history
