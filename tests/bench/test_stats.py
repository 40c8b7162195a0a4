"""Statistics on constructed data with known answers."""

from __future__ import annotations

import random

import pytest

from bench import stats


def test_percentile_linear_interpolation_known_values() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert stats.percentile(xs, 50) == pytest.approx(5.5)
    assert stats.percentile(xs, 90) == pytest.approx(9.1)  # pos 8.1 between 9 and 10
    assert stats.percentile(xs, 99) == pytest.approx(9.91)
    assert stats.percentile(xs, 0) == 1.0
    assert stats.percentile(xs, 100) == 10.0
    assert stats.percentile([7.0], 90) == 7.0
    assert stats.percentile([3.0, 1.0, 2.0], 50) == 2.0  # unsorted input


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        stats.percentile([], 50)
    with pytest.raises(ValueError, match="q=101"):
        stats.percentile([1.0], 101)


def test_summary_shape_and_empty() -> None:
    s = stats.summary([2.0, 4.0])
    assert s == {"n": 2, "mean": 3.0, "p50": 3.0, "p90": pytest.approx(3.8), "p99": pytest.approx(3.98)}
    assert stats.summary([]) == {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None}


def test_bootstrap_ci_covers_true_median_on_constructed_samples() -> None:
    # 40 independent experiments, each 20 sessions of 4 turns from Exp(1) shifted by 3: true median 3+ln 2.
    true = 3 + 0.6931471805599453
    covered = 0
    for k in range(40):
        rng = random.Random(k)
        clusters = [[3 + rng.expovariate(1.0) for _ in range(4)] for _ in range(20)]
        ci = stats.bootstrap_ci(clusters, stats.median, n_resamples=400, seed=k)
        assert ci is not None and ci[0] <= ci[1]
        covered += ci[0] <= true <= ci[1]
    assert covered >= 34  # nominal 95%: 38 of 40 expected; well below would mean a broken interval


def test_bootstrap_ci_is_wider_when_turns_within_a_session_are_correlated() -> None:
    rng = random.Random(1)
    clusters = []
    for _ in range(15):
        level = rng.gauss(10, 3)  # a session effect shared by all its turns
        clusters.append([level + rng.gauss(0, 0.2) for _ in range(6)])
    clustered = stats.bootstrap_ci(clusters, stats.mean, seed=0)
    naive = stats.bootstrap_ci([[x] for c in clusters for x in c], stats.mean, seed=0)
    assert clustered is not None and naive is not None
    # 6 nearly identical turns per session carry about one turn's information: width ratio near sqrt(6).
    assert clustered[1] - clustered[0] > 1.8 * (naive[1] - naive[0])


def test_bootstrap_ci_degenerate_cases() -> None:
    assert stats.bootstrap_ci([]) is None
    assert stats.bootstrap_ci([[], []]) is None
    assert stats.bootstrap_ci([[1.0, 2.0, 3.0]]) is None  # one session: no between-session variability
    assert stats.bootstrap_ci([[4.0], [], [4.0, 4.0]]) == (4.0, 4.0)  # constant data: a point
    with pytest.raises(ValueError, match="level"):
        stats.bootstrap_ci([[1.0], [2.0]], level=1.5)


def test_bootstrap_is_reproducible_for_a_seed() -> None:
    data = [[1.0, 5.0], [2.0], [9.0, 3.0, 4.0]]
    assert stats.bootstrap_ci(data, seed=7) == stats.bootstrap_ci(data, seed=7)


def test_efficiency_is_saving_over_the_smaller_of_duration_and_think() -> None:
    assert stats.efficiency(2.0, duration_s=4.0, available_s=8.0) == 0.5  # ideal = duration
    assert stats.efficiency(2.0, duration_s=10.0, available_s=4.0) == 0.5  # ideal = think time
    assert stats.efficiency(-1.0, duration_s=2.0, available_s=2.0) == -0.5  # speculation made it slower
    assert stats.efficiency(1.0, duration_s=0.0, available_s=5.0) is None
    assert stats.pooled_efficiency([1.0, 3.0], [2.0, 10.0], [5.0, 2.0]) == 0.75  # (1 + min(3, 2)) / (2 + 2)
    assert stats.pooled_efficiency([], [], []) is None


def test_break_even_interpolates_the_first_zero_crossing() -> None:
    assert stats.break_even([0, 2, 5, 10], [-0.4, -0.2, 0.4, 2.0]) == pytest.approx(3.0)
    assert stats.break_even([5, 0, 2], [1.0, -1.0, 0.0]) == 2.0  # unsorted input; exactly zero counts
    assert stats.break_even([0, 2], [0.1, 0.5]) == 0  # already worth it at 0 s
    assert stats.break_even([0, 2], [-1.0, -0.5]) is None  # never
    assert stats.break_even([], []) is None
    with pytest.raises(ValueError, match="length"):
        stats.break_even([1], [])


def test_efficiency_never_exceeds_one() -> None:
    assert stats.efficiency(5.0, duration_s=2.0, available_s=4.0) == 1.0
    assert stats.efficiency(-1.0, duration_s=2.0, available_s=4.0) == -0.5


def test_break_even_ci_brackets_the_crossing() -> None:
    xs = [0.0, 2.0, 4.0]
    # Sessions at each x: below zero at 0 s, around zero at 2 s, clearly above at 4 s.
    sessions = [[[-1.0], [-1.2], [-0.8]], [[-0.2], [0.2], [0.1], [-0.1]], [[1.0], [1.1], [0.9]]]
    clusters = [[[s] for s in point] for point in sessions]  # each session its own scenario
    lo, hi = stats.break_even_ci(xs, clusters, seed=1)
    assert 1.0 < lo <= 2.0 <= hi < 3.0
    assert stats.break_even_ci(xs, [[[[1.0]]], [[[1.0]]], [[[1.0]]]]) is None  # one session per point


def correlated(
    n_scenarios: int, reps: int, *, between: float, within: float, seed: int
) -> list[list[list[float]]]:
    """Savings of ``reps`` reps (4 turns each) of each scenario: a scenario effect (sd ``between``) shared
    by all its reps, plus rep noise (sd ``within``)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_scenarios):
        level = rng.gauss(3.0, between)
        out.append([[level + rng.gauss(0, within) for _ in range(4)] for _ in range(reps)])
    return out


def test_hierarchical_ci_is_wider_than_the_pair_ci_when_reps_of_a_scenario_are_correlated() -> None:
    data = correlated(8, 5, between=1.0, within=0.1, seed=3)
    hier = stats.hierarchical_bootstrap_ci(data, stats.mean, seed=0)
    pairs = stats.bootstrap_ci([rep for scn in data for rep in scn], stats.mean, seed=0)
    assert hier is not None and pairs is not None
    # 5 near-identical reps per scenario carry about one rep's information: the pair-level bootstrap
    # counts 40 clusters where there are 8, and its interval is about sqrt(5) too narrow.
    assert hier[1] - hier[0] > 1.8 * (pairs[1] - pairs[0])
    assert hier[0] < stats.mean([x for s in data for r in s for x in r]) < hier[1]


def test_hierarchical_ci_is_close_to_the_pair_ci_when_reps_are_independent() -> None:
    data = correlated(8, 5, between=0.0, within=1.0, seed=3)
    hier = stats.hierarchical_bootstrap_ci(data, stats.mean, seed=0)
    pairs = stats.bootstrap_ci([rep for scn in data for rep in scn], stats.mean, seed=0)
    assert hier is not None and pairs is not None
    # The two-stage bootstrap adds the reps' own variance once more (a known, conservative bias), no more.
    assert 0.8 < (hier[1] - hier[0]) / (pairs[1] - pairs[0]) < 1.5


def test_hierarchical_ci_degenerate_cases_fall_back_to_one_stage() -> None:
    assert stats.hierarchical_bootstrap_ci([]) is None
    assert stats.hierarchical_bootstrap_ci([[[1.0, 2.0]]]) is None  # one rep of one scenario
    one_scenario = [[[1.0, 2.0], [5.0], [3.0, 4.0]]]  # then it resamples the reps
    assert stats.hierarchical_bootstrap_ci(one_scenario, seed=2) == stats.bootstrap_ci(
        one_scenario[0], seed=2
    )
    one_rep_each = [[[1.0, 2.0]], [[5.0]], [[3.0, 4.0]], []]  # then the scenarios
    assert stats.hierarchical_bootstrap_ci(one_rep_each, seed=2) == stats.bootstrap_ci(
        [g[0] for g in one_rep_each if g], seed=2
    )
    with pytest.raises(ValueError, match="level"):
        stats.hierarchical_bootstrap_ci([[[1.0]], [[2.0]]], level=0)
