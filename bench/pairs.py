"""The validated records of a run (or a slice of it), how arms are paired, and how paired values are
clustered for the bootstrap.

Pairing: a turn of one arm is compared with the turn of another arm in the same group (condition,
scenario, rep) with the same index; all arms sent the same prompt. Only complete pairs enter paired figures.

Clusters: the values of one pair (one rep of one scenario) are correlated (one conversation, workspace and
server), and so are the reps of one scenario (one script and workspace). Every CI therefore resamples
scenarios, then reps within each (:func:`bench.stats.hierarchical_bootstrap_ci`); the one-stage CI over
pairs, which the runs before issue #24 reported, is kept beside it as ``ci95_pairs``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench import stats
from bench.records import BenchEvent, BenchSpeculationEvent, BenchSuggestionEvent, SessionRecord, TurnRecord

ARMS = ("plain", "suggest", "speculative")
CI_METHOD = (
    "percentile bootstrap, 2000 resamples, two-stage: scenarios with replacement, then reps (sessions) "
    "within each drawn scenario; ci95_pairs resamples pairs (reps) only"
)


@dataclass(frozen=True)
class Records:
    """One slice of a run: its sessions and their turns and engine events."""

    turns: list[TurnRecord]
    sessions: list[SessionRecord]
    events: list[BenchEvent]

    def only(self, sessions: Iterable[SessionRecord]) -> Records:
        """The slice of these sessions (a condition, a scenario)."""
        ss = list(sessions)
        ids = {s.session for s in ss}
        return Records(
            [t for t in self.turns if t.session in ids], ss, [e for e in self.events if e.session in ids]
        )

    def arm_turns(self, arm: str) -> list[TurnRecord]:
        return [t for t in self.turns if t.arm == arm]

    def arm_sessions(self, arm: str) -> list[SessionRecord]:
        return [s for s in self.sessions if s.arm == arm]

    def speculations(self, arm: str = "speculative") -> list[BenchSpeculationEvent]:
        return [e for e in self.events if isinstance(e, BenchSpeculationEvent) and e.arm == arm]

    def suggestions(self, arm: str = "speculative") -> list[BenchSuggestionEvent]:
        return [e for e in self.events if isinstance(e, BenchSuggestionEvent) and e.arm == arm]


Pair = tuple[TurnRecord, TurnRecord]


def paired_turns(turns: Sequence[TurnRecord], base: str = "plain", arm: str = "speculative") -> list[Pair]:
    """(base, arm) turn pairs with the same pair id and turn index, in (pair, turn) order."""
    by: dict[tuple[str, int], dict[str, TurnRecord]] = defaultdict(dict)
    for t in turns:
        by[(t.pair, t.turn)][t.arm] = t
    return [(v[base], v[arm]) for _, v in sorted(by.items()) if base in v and arm in v]


def user_saving(base: TurnRecord, arm: TurnRecord) -> float:
    """What the user waited less in ``arm``: entering the prompt (typing or Tab) and the answer."""
    return base.latency_s + base.input_s - arm.latency_s - arm.input_s


def answer_saving(base: TurnRecord, arm: TurnRecord) -> float:
    """Submit-to-answer latency saved (input time left out)."""
    return base.latency_s - arm.latency_s


Nested = list[list[list[float]]]  # scenario -> pair -> values


def nested(values: Iterable[tuple[TurnRecord, float]]) -> Nested:
    """Values grouped by scenario, then by pair (rep), in the order first seen."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t, v in values:
        by[t.scenario][t.pair].append(v)
    return [list(reps.values()) for reps in by.values()]


def flat(groups: Nested) -> list[float]:
    return [x for scn in groups for rep in scn for x in rep]


def n_pairs(groups: Nested) -> int:
    return sum(len(scn) for scn in groups)


def estimate(
    groups: Nested, stat: Callable[[Sequence[float]], float], name: str, *, seed: int
) -> dict[str, Any]:
    """``{n, <name>, ci95, ci95_pairs}``: the point estimate over every value, the hierarchical CI and the
    pair-level CI beside it (None where there are too few clusters)."""
    xs = flat(groups)
    hier = stats.hierarchical_bootstrap_ci(groups, stat, seed=seed)
    pairs = stats.bootstrap_ci([rep for scn in groups for rep in scn], stat, seed=seed)
    return {
        "n": len(xs),
        name: stat(xs) if xs else None,
        "ci95": list(hier) if hier else None,
        "ci95_pairs": list(pairs) if pairs else None,
    }
