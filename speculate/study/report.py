"""``speculate study report DIR…``: one or many people's study directories pooled, and what ``bench`` reports
(saving per accepted and per later turn, acceptance as an outcome, cost, harm), plus acceptance by the
suggestion's length and first word. Definitions: docs/study.md. Before any saving, a balance check: think
time (from when the prompt opened to the first key, never from when the ghost text appeared) and typing by
arm, with the CI of their difference (:func:`balance`).

A study is not paired as the benchmark is (there, every arm sends the same prompt): each turn is in one arm,
drawn at random before anything of it was shown, so an arm's effect is a difference between the turns of two
arms. Every CI is the two-stage percentile bootstrap of
:func:`speculate.statistics.hierarchical_bootstrap_ci` with the person as the top cluster and the session (one
REPL run) nested in it, since the turns of one session, and the sessions of one person, are not independent.
The statistics are the benchmark's, kept below both (the library does not depend on the benchmark package).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speculate import statistics as st
from speculate.backends import is_simulator
from speculate.study.classify import LENGTH_BUCKETS, first_word, length_bucket
from speculate.study.records import StudySession, TurnRecord, read_session, session_files

CI_METHOD = (
    "percentile bootstrap, two-stage: people (study directories' participant ids) with replacement, "
    "then sessions within each drawn person; a contrast undefined on a resample (one side not drawn) "
    "leaves that resample out, and is reported without a CI when that happens to over 10% of them"
)
GHOST_ARMS = ("speculative", "suggest")
LENGTH_ORDER = ("0", *(f"{lo}-{hi}" if hi is not None else f"{lo}+" for lo, hi in LENGTH_BUCKETS))
FIRST_WORDS = 10  # the most frequent first words listed one by one; the rest pooled as "(other)"


@dataclass(frozen=True)
class Turn:
    user: str
    session: str
    rec: TurnRecord


def load(dirs: Sequence[Path]) -> list[StudySession]:
    """Every session of ``dirs``; a session found twice (a directory given twice, or copied) counts once."""
    seen: dict[str, StudySession] = {}
    for d in dirs:
        for f in session_files(d):
            s = read_session(f)
            seen.setdefault(s.start.session, s)
    return list(seen.values())


Nested = list[list[list[Any]]]


def nest(turns: Iterable[Turn], value: Callable[[Turn], Any]) -> Nested:
    """``value(turn)`` grouped by person, then session (None values left out), in the order first seen."""
    by: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for t in turns:
        v = value(t)
        if v is not None:
            by[t.user][t.session].append(v)
    return [list(sessions.values()) for sessions in by.values()]


def _flat(groups: Nested) -> list[Any]:
    return [x for user in groups for sess in user for x in sess]


def contrast(
    center: Callable[[Sequence[float]], float], base: str, arm: str
) -> Callable[[Sequence[Any]], float]:
    """A statistic of ``(arm, value)`` pairs: center(base's values) - center(arm's values); NaN when a side
    has none (a bootstrap resample that drew none of them)."""

    def stat(pairs: Sequence[Any]) -> float:
        b = [x for a, x in pairs if a == base]
        s = [x for a, x in pairs if a == arm]
        return center(b) - center(s) if b and s else math.nan

    return stat


def estimate(
    turns: Sequence[Turn],
    value: Callable[[TurnRecord], float | None],
    center: str,
    base: str,
    arm: str,
    *,
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    """``base`` minus ``arm`` of ``center`` (median or mean) of ``value``, with both sides' n and centers and
    the CI."""
    fn = st.median if center == "median" else st.mean
    groups = nest(
        (t for t in turns if t.rec.arm in (base, arm)),
        lambda t: None if (v := value(t.rec)) is None else (t.rec.arm, v),
    )
    pairs = _flat(groups)
    sides = {a: [x for b, x in pairs if b == a] for a in (base, arm)}
    point = contrast(fn, base, arm)(pairs)
    ci = st.hierarchical_bootstrap_ci(groups, contrast(fn, base, arm), seed=seed, n_resamples=resamples)
    return {
        "n": {a: len(v) for a, v in sides.items()},
        center: {a: fn(v) if v else None for a, v in sides.items()},
        "difference": None if math.isnan(point) else point,
        "ci95": list(ci) if ci else None,
    }


def rate(
    turns: Sequence[Turn], hit: Callable[[TurnRecord], bool], *, seed: int, resamples: int
) -> dict[str, Any]:
    """The share of ``turns`` for which ``hit`` holds, with its CI (the mean of 0/1 values)."""
    groups = nest(turns, lambda t: 1.0 if hit(t.rec) else 0.0)
    xs = _flat(groups)
    ci = st.hierarchical_bootstrap_ci(groups, st.mean, seed=seed, n_resamples=resamples)
    return {"n": len(xs), "rate": st.mean(xs) if xs else None, "ci95": list(ci) if ci else None}


def usable(t: Turn) -> bool:
    """A turn whose arm could act (eligible) and that ended with an answer (no error, not cancelled)."""
    return t.rec.eligible and not t.rec.error


def wait(r: TurnRecord) -> float | None:
    return r.wait_s


def answer(r: TurnRecord) -> float:
    return r.latency_s


def cost(r: TurnRecord) -> float:
    return r.cost_total_usd


def shown_model(t: Turn) -> bool:
    return t.rec.suggestion_source == "model" and t.rec.suggestion is not None


def versus(turns: Sequence[Turn], base: str, arm: str, *, seed: int, resamples: int) -> dict[str, Any] | None:
    """``arm`` against ``base`` over usable turns: the saving (base minus arm; positive: ``arm`` is faster) of
    the wait (typing and answer) and of the answer alone, per turn taken as-is (medians) and per later turn
    (means), and the extra cost per turn."""
    ts = [t for t in turns if usable(t) and t.rec.arm in (base, arm)]
    if not {t.rec.arm for t in ts} >= {base, arm}:
        return None
    # Per accepted turn: taken model suggestions only. A taken demo hint (fork_possible false) had no fork
    # behind it in any arm, so it says nothing of speculation; left out of both arms alike, and counted.
    taken_all = [t for t in ts if t.rec.taken == "taken"]
    taken = [t for t in taken_all if shown_model(t)]
    kw = {"seed": seed, "resamples": resamples}
    out: dict[str, Any] = {
        "base": base,
        "arm": arm,
        "saved_per_later_turn_s": estimate(ts, wait, "mean", base, arm, **kw),
        "saved_per_later_turn_answer_s": estimate(ts, answer, "mean", base, arm, **kw),
        # arm minus base: what a turn costs more in ``arm``
        "extra_cost_per_turn_usd": _negated(estimate(ts, cost, "mean", base, arm, **kw)),
    }
    if base != "plain":  # plain shows nothing to take
        out["saved_per_accepted_turn_s"] = estimate(taken, wait, "median", base, arm, **kw)
        out["saved_per_accepted_turn_answer_s"] = estimate(taken, answer, "median", base, arm, **kw)
        out["taken_without_a_fork"] = len(taken_all) - len(taken)
    saved, extra = (
        out["saved_per_later_turn_answer_s"]["difference"],
        out["extra_cost_per_turn_usd"]["difference"],
    )
    out["cost_per_second_saved_usd"] = extra / saved if saved and extra is not None and saved > 0 else None
    return out


def _negated(e: dict[str, Any]) -> dict[str, Any]:
    d, ci = e["difference"], e["ci95"]
    return {**e, "difference": None if d is None else -d, "ci95": None if ci is None else [-ci[1], -ci[0]]}


def _taken_is(what: str) -> Callable[[TurnRecord], bool]:
    return lambda r: r.taken == what


def acceptance(turns: Sequence[Turn], arms: Sequence[str], *, seed: int, resamples: int) -> dict[str, Any]:
    """What people did with the model's suggestions, by arm. The arm is not visible before the decision, so
    these should not differ; a difference would mean the arm shows through (or chance)."""
    kw = {"seed": seed, "resamples": resamples}
    shown = [t for t in turns if usable(t) and shown_model(t)]
    out: dict[str, Any] = {}
    for a in arms:
        mine = [t for t in shown if t.rec.arm == a]
        if mine:
            out[a] = {k: rate(mine, _taken_is(k), **kw) for k in ("taken", "edited", "ignored")}
    if all(a in out for a in GHOST_ARMS):
        diff = estimate(
            shown, lambda r: 1.0 if r.taken == "taken" else 0.0, "mean", "suggest", "speculative", **kw
        )
        out["taken_difference"] = _negated(diff)  # speculative minus suggest
    return out


def harm(turns: Sequence[Turn], arms: Sequence[str], *, seed: int, resamples: int) -> dict[str, Any]:
    """What speculation may cost the person: slower answers on the turns where its fork was thrown away (not
    taken), turns that failed or were cancelled, and the engine's outcomes other than a clean acceptance."""
    not_taken = [t for t in turns if usable(t) and t.rec.taken != "taken"]
    slower = _negated(
        estimate(not_taken, answer, "mean", "suggest", "speculative", seed=seed, resamples=resamples)
    )
    eligible = [t for t in turns if t.rec.eligible]
    spec = [t.rec.speculation for t in turns if t.rec.speculation is not None]
    dropped = [
        t
        for t in turns
        if t.rec.arm == "speculative"
        and t.rec.taken == "taken"
        and not t.rec.accepted
        and t.rec.speculation is not None
        and not t.rec.error
    ]
    return {
        "slower_when_not_taken_s": slower,  # speculative minus suggest: positive is harm
        "failed_or_cancelled": {
            a: {
                "turns": sum(t.rec.arm == a for t in eligible),
                "failed": sum(t.rec.arm == a and bool(t.rec.error) for t in eligible),
            }
            for a in arms
        },
        # Accepting asks once about what the fork ran; a live turn asks call by call: both count, and the
        # time the person took to answer is part of the answer's latency.
        "questions": {
            a: _questions([t.rec for t in eligible if t.rec.arm == a and not t.rec.error]) for a in arms
        },
        "speculation_outcomes": dict(sorted(Counter(s.outcome for s in spec).items())),
        "boundaries": dict(sorted(Counter(s.boundary for s in spec if s.boundary).items())),
        "taken_but_not_used": {
            "turns": len(dropped),
            "outcomes": dict(
                sorted(Counter(t.rec.speculation.outcome for t in dropped if t.rec.speculation).items())
            ),
        },
    }


def _questions(rs: Sequence[TurnRecord]) -> dict[str, float | None]:
    n = len(rs)
    return {
        "per_turn": sum(r.questions for r in rs) / n if n else None,
        "seconds_per_turn": sum(r.question_s for r in rs) / n if n else None,
    }


def costs(eligible: Sequence[Turn], arms: Sequence[str]) -> dict[str, Any]:
    """Dollars per eligible turn by arm: the main turn's plus the cycle's before it (suggestion, fork)."""
    out: dict[str, Any] = {}
    for a in arms:
        rs = [t.rec for t in eligible if t.rec.arm == a]
        out[a] = {
            "turns": len(rs),
            "per_turn_usd": sum(r.cost_total_usd for r in rs) / len(rs) if rs else None,
            "engine_per_turn_usd": sum(r.engine_cost_usd for r in rs) / len(rs) if rs else None,
        }
    return out


def by_group(
    turns: Sequence[Turn],
    key: Callable[[str], str],
    *,
    seed: int,
    resamples: int,
    top: int | None = None,
    order: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Acceptance of the model's suggestions (ghost-text arms pooled), grouped by ``key(suggestion)``."""
    shown = [t for t in turns if usable(t) and shown_model(t) and t.rec.arm in GHOST_ARMS]
    groups: dict[str, list[Turn]] = defaultdict(list)
    for t in shown:
        groups[key(t.rec.suggestion or "")].append(t)
    names = (
        [k for k in order if k in groups]
        if order is not None
        else sorted(groups, key=lambda k: (-len(groups[k]), k))
    )
    if top is not None and len(names) > top:
        other = [t for k in names[top:] for t in groups.pop(k)]
        names = [*names[:top], "(other)"]
        groups["(other)"] = other
    kw = {"seed": seed, "resamples": resamples}
    return {
        k: {
            "taken": rate(groups[k], lambda r: r.taken == "taken", **kw),
            "edited_share": sum(t.rec.taken == "edited" for t in groups[k]) / len(groups[k]),
        }
        for k in names
    }


def think(r: TurnRecord) -> float | None:
    return r.think_open_s


def typing(r: TurnRecord) -> float | None:
    return r.typing_open_s


def timings(turns: Sequence[Turn], arms: Sequence[str]) -> dict[str, Any]:
    """Think (from when the prompt opened to the first key), typing, first-token and answer times by arm
    (think and typing should not differ: the arm is not visible before the prompt is sent)."""
    out: dict[str, Any] = {}
    for a in arms:
        rs = [t.rec for t in turns if usable(t) and t.rec.arm == a]
        out[a] = {
            name: st.summary([v for r in rs if (v := get(r)) is not None])
            for name, get in (
                ("think_s", think),
                ("typing_s", typing),
                ("ttft_s", lambda r: r.ttft_s),
                ("latency_s", answer),
            )
        }
    return out


def balance(turns: Sequence[Turn], arms: Sequence[str], *, seed: int, resamples: int) -> dict[str, Any]:
    """The check that comes before any saving: did the arms get comparable people and behaviour? Think time
    (prompt opened to first key) and typing (first key to Enter) are decided before the arm can show, so
    between the ghost-text arms their difference (suggest minus speculative) should be zero: ``passes`` when
    both CIs cover it (None when there is no CI). ``per_person``: each person's eligible turns by arm, and
    the largest gap between two arms' counts (blocked randomization keeps it small)."""
    ts = [t for t in turns if usable(t)]
    kw = {"seed": seed, "resamples": resamples}
    out: dict[str, Any] = {}
    if all(any(t.rec.arm == a for t in ts) for a in GHOST_ARMS):
        out["think_s"] = estimate(ts, think, "mean", "suggest", "speculative", **kw)
        out["typing_s"] = estimate(ts, typing, "mean", "suggest", "speculative", **kw)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for t in turns:
        if t.rec.eligible:
            counts[t.user][t.rec.arm] += 1
    out["per_person"] = {
        u: {"by_arm": {a: c[a] for a in arms}, "gap": max(c[a] for a in arms) - min(c[a] for a in arms)}
        for u, c in counts.items()
    }
    cis = [out[k]["ci95"] for k in ("think_s", "typing_s") if k in out]
    out["passes"] = None if len(cis) < 2 or None in cis else all(lo <= 0 <= hi for lo, hi in cis)
    return out


def build_report(sessions: Sequence[StudySession], *, seed: int = 0, resamples: int = 2000) -> dict[str, Any]:
    if not sessions:
        raise ValueError("no study sessions to report on")
    turns = [Turn(s.start.user, s.start.session, t) for s in sessions for t in s.turns]
    arms = [a for a in ("speculative", "suggest", "plain") if any(a in s.start.arms for s in sessions)]
    kw = {"seed": seed, "resamples": resamples}
    eligible = [t for t in turns if t.rec.eligible]
    report: dict[str, Any] = {
        "users": len({s.start.user for s in sessions}),
        "sessions": len(sessions),
        "turns": len(turns),
        "eligible_turns": len(eligible),
        "usable_turns": sum(usable(t) for t in turns),
        "turns_by_arm": {a: sum(t.rec.arm == a for t in eligible) for a in arms},
        "models": dict(Counter(f"{s.start.model} ({s.start.model_name})" for s in sessions)),
        "frontends": dict(Counter(s.start.frontend for s in sessions)),
        "time_scales": sorted({s.start.time_scale for s in sessions}),
        "simulated": all(is_simulator(s.start.model) or s.start.frontend == "api" for s in sessions),
        "ci_method": CI_METHOD,
        "resamples": resamples,
        "seed": seed,
        "balance": balance(turns, arms, **kw),
        "vs": {b: v for b in ("suggest", "plain") if (v := versus(turns, b, "speculative", **kw))},
    }
    if (sp := versus(turns, "plain", "suggest", **kw)) is not None:
        report["suggest_vs_plain"] = sp
    spec_taken = [t for t in turns if usable(t) and t.rec.arm == "speculative" and t.rec.taken == "taken"]
    report["speculation_used_share"] = (
        sum(t.rec.accepted for t in spec_taken) / len(spec_taken) if spec_taken else None
    )
    report["acceptance"] = acceptance(turns, arms, **kw)
    report["cost"] = costs(eligible, arms)
    report["cost"]["trailing_engine_usd"] = sum(s.end.trailing_engine_cost_usd for s in sessions if s.end)
    report["harm"] = harm(turns, arms, **kw)
    report["timings"] = timings(turns, arms)
    report["by_length"] = by_group(turns, length_bucket, order=LENGTH_ORDER, **kw)
    report["by_first_word"] = by_group(turns, first_word, top=FIRST_WORDS, seed=seed, resamples=resamples)
    return report
