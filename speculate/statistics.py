"""Statistics for the experiments (:mod:`bench`) and the study (:mod:`speculate.study`), in plain Python so
each is checkable by hand. Here, below both, so the study's report does not import the benchmark;
:mod:`bench.stats` re-exports it.

- :func:`percentile`: linear interpolation between closest ranks (numpy's default method).
- :func:`bootstrap_ci`: percentile bootstrap that resamples whole sessions (clusters), because turns of one
  session share a conversation, a workspace and a server and are not independent.
- :func:`hierarchical_bootstrap_ci`: the same, two-stage: scenarios first, then reps (sessions) within each
  drawn scenario, because the reps of one scenario share its script and workspace and are not independent
  either. Every CI in the reports and the README is this one; the one-stage CI over pairs is shown beside it.
- :func:`efficiency`: measured saving / ideal saving, ideal = min(speculation duration, time available).
- :func:`break_even`: where a curve of mean saving against think time first crosses zero.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def percentile(xs: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``xs``; raises ValueError on an empty sample."""
    if not xs:
        raise ValueError("percentile of an empty sample")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q}: must be within 0..100")
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(xs: Sequence[float]) -> float:
    return percentile(xs, 50)


def mean(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("mean of an empty sample")
    return sum(xs) / len(xs)


def summary(xs: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, p50, p90, p99 (None when empty) — the shape every latency table uses."""
    if not xs:
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None}
    return {
        "n": len(xs),
        "mean": mean(xs),
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
    }


def bootstrap_ci(
    clusters: Sequence[Sequence[float]],
    stat: Callable[[Sequence[float]], float] = median,
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile-bootstrap CI of ``stat`` over the pooled values, resampling clusters with replacement.

    Empty clusters (sessions with no accepted turn) are dropped first, so every resample has values.
    Returns None with fewer than two clusters: resampling one session says nothing about variability.
    """
    groups = [list(c) for c in clusters if len(c)]
    if len(groups) < 2:
        return None
    if not 0 < level < 1:
        raise ValueError(f"bootstrap level {level}: must be within (0, 1)")
    rng = random.Random(seed)
    k = len(groups)
    stats: list[float] = []
    for _ in range(n_resamples):
        pooled: list[float] = []
        for _ in range(k):
            pooled.extend(groups[rng.randrange(k)])
        stats.append(stat(pooled))
    alpha = (1 - level) / 2
    return percentile(stats, 100 * alpha), percentile(stats, 100 * (1 - alpha))


Nested = Sequence[Sequence[Sequence[float]]]  # scenario -> rep (pair) -> values


def hierarchical_bootstrap_ci(
    groups: Sequence[Sequence[Sequence[T]]],
    stat: Callable[[Sequence[T]], float] = median,  # type: ignore[assignment]  # median: for floats
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    max_undefined: float = 0.1,
) -> tuple[float, float] | None:
    """Percentile-bootstrap CI of ``stat`` over the pooled values, resampling in two stages.

    ``groups[i][j]`` are the values of rep ``j`` of scenario ``i``. Each resample draws as many scenarios
    as there are, with replacement, and then, within each drawn scenario, as many of its reps as it has,
    with replacement (the two-stage bootstrap of Davison & Hinkley 1997, §3.8). Empty reps and scenarios
    are dropped first. Returns None with fewer than two reps in all: with one scenario it is the one-stage
    bootstrap over its reps; with one rep per scenario, the one-stage bootstrap over scenarios.

    Values need not be numbers: the study's report (:mod:`speculate.study.report`, users then sessions)
    passes ``(arm, value)`` pairs and a ``stat`` contrasting two arms, which is NaN on a resample that drew
    no value of one of them. Such resamples are left out; when they are more than ``max_undefined`` of all,
    the CI is None (too few clusters hold both sides).
    """
    gs = [g for g in ([list(r) for r in grp if len(r)] for grp in groups) if g]
    if sum(len(g) for g in gs) < 2:
        return None
    if not 0 < level < 1:
        raise ValueError(f"bootstrap level {level}: must be within (0, 1)")
    rng = random.Random(seed)
    k = len(gs)
    stats: list[float] = []
    for _ in range(n_resamples):
        pooled: list[T] = []
        for _ in range(k):
            pooled.extend(_two_stage(gs, rng))
        stats.append(stat(pooled))
    stats = [x for x in stats if not math.isnan(x)]
    if len(stats) < (1 - max_undefined) * n_resamples:
        return None
    alpha = (1 - level) / 2
    return percentile(stats, 100 * alpha), percentile(stats, 100 * (1 - alpha))


def _one(n: int, rng: random.Random) -> int:
    # No draw from a single choice: with one scenario (or one rep each) the resamples are exactly the
    # one-stage bootstrap's, for the same seed.
    return rng.randrange(n) if n > 1 else 0


def _two_stage(groups: list[list[list[Any]]], rng: random.Random) -> list[Any]:
    """One drawn scenario's values: the scenario, then as many of its reps as it has, with replacement."""
    reps = groups[_one(len(groups), rng)]
    return [x for _ in reps for x in reps[_one(len(reps), rng)]]


def efficiency(saving_s: float, duration_s: float, available_s: float) -> float | None:
    """Measured saving over the ideal min(duration, available), capped at 1 (a saving beyond what the fork
    ran or the user gave it is jitter, not speculation); None when the ideal is zero."""
    ideal = min(duration_s, available_s)
    if ideal <= 0:
        return None
    return min(saving_s, ideal) / ideal


def pooled_efficiency(
    savings: Sequence[float], durations: Sequence[float], available: Sequence[float]
) -> float | None:
    """Sum of savings over sum of ideals (a ratio of sums: short turns do not dominate)."""
    ideals = [min(d, a) for d, a in zip(durations, available, strict=True)]
    if sum(ideals) <= 0:
        return None
    return sum(min(s, i) for s, i in zip(savings, ideals, strict=True)) / sum(ideals)


def break_even(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The smallest x where the piecewise-linear curve through (xs, ys) reaches y >= 0.

    Returns xs[0] if the curve starts non-negative, None if it never gets there.
    """
    if len(xs) != len(ys):
        raise ValueError("break_even: xs and ys differ in length")
    pts = sorted(zip(xs, ys, strict=True))
    if not pts:
        return None
    if pts[0][1] >= 0:
        return pts[0][0]
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        if y1 >= 0:
            return x0 + (x1 - x0) * (-y0) / (y1 - y0)
    return None


def break_even_ci(
    xs: Sequence[float],
    clusters: Sequence[Nested],
    *,
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Bootstrap CI of :func:`break_even` over a curve of means: ``clusters[i]`` are the values at ``xs[i]``
    nested as scenario -> rep -> values, resampled in two stages (scenarios, then reps) independently per
    point. A resample whose curve never reaches 0 counts as +inf (the upper bound is then inf); one already
    >= 0 at the first x counts as that x (a bound, not a value).
    """
    groups = [[g for g in ([list(r) for r in grp if len(r)] for grp in cs) if g] for cs in clusters]
    if len(xs) < 2 or any(sum(len(g) for g in gs) < 2 for gs in groups):
        return None
    rng = random.Random(seed)
    vals: list[float] = []
    for _ in range(n_resamples):
        ys = []
        for gs in groups:
            pooled: list[float] = []
            for _ in gs:
                pooled.extend(_two_stage(gs, rng))
            ys.append(mean(pooled))
        b = break_even(xs, ys)
        vals.append(math.inf if b is None else b)
    alpha = (1 - level) / 2
    vals.sort()
    lo, hi = vals[int(alpha * (len(vals) - 1))], vals[math.ceil((1 - alpha) * (len(vals) - 1))]
    return lo, hi
