"""Every figure of one slice of a run (a condition, a scenario), one function per group; definitions in
docs/experiments.md. :func:`analyze` puts them together in the shape summary.json keeps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from bench import stats
from bench.pairs import (
    ARMS,
    Records,
    answer_saving,
    estimate,
    flat,
    n_pairs,
    nested,
    paired_turns,
    user_saving,
)
from bench.records import BenchSpeculationEvent

TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def tok_sum(dicts: Iterable[dict[str, Any]]) -> dict[str, int]:
    out = dict.fromkeys(TOKEN_KINDS, 0)
    for d in dicts:
        for k in TOKEN_KINDS:
            out[k] += int(d.get(k) or 0)
    return out


def count(items: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(items).items()))


def arm_figures(r: Records, arm: str) -> dict[str, Any] | None:
    """Latency, wall time, cost and tokens of one arm (None if it did not run)."""
    ts, ss = r.arm_turns(arm), r.arm_sessions(arm)
    if not ss:
        return None
    cost = sum(s.cost_usd for s in ss)
    return {
        "sessions": len(ss),
        "turns": len(ts),
        "errors": sum(bool(t.error) for t in ts),
        "turn_latency_s": stats.summary([t.latency_s for t in ts]),
        "session_wall_s": stats.summary([s.wall_s for s in ss]),
        "accepted": sum(t.accepted for t in ts),
        "cost_usd": cost,
        "cost_per_turn_usd": cost / len(ts) if ts else None,
        "tokens": {
            "main": tok_sum(t.tokens for t in ts),
            "suggestion": tok_sum(e.tokens for e in r.suggestions(arm)),
            "speculation": tok_sum(e.tokens for e in r.speculations(arm)),
        },
    }


def acceptance(r: Records) -> dict[str, Any]:
    """Acceptance over later turns of the speculative arm. A suggestion counts as offered if it was visible
    when the user looked up or appeared while they typed: in each case the user could have taken it."""
    later = [t for t in r.arm_turns("speculative") if t.turn > 0]
    had = [
        t for t in later if t.suggestion_shown is not None or t.suggestion_at_submit is not None or t.accepted
    ]
    accepted = [t for t in later if t.accepted]
    return {
        "accepted": len(accepted),
        "suggestion_coverage": len(had) / len(later) if later else None,
        # Under a forced hit rate: the wrong suggestions' kinds (speculate.sim.draw), so cheap misses show.
        "miss_kinds": dict(Counter(t.miss_kind for t in later if t.miss_kind)),
        "acceptance_rate": len(accepted) / len(had) if had else None,
        "accepted_by_input": {k: sum(t.input == k for t in accepted) for k in ("tab", "typed")},
    }


def versus(r: Records, base: str, arm: str = "speculative", *, seed: int = 0) -> dict[str, Any] | None:
    """``arm`` against ``base``, paired: saving per accepted turn, per later turn (input time included: the
    user waits for typing too, and Tab is what the suggest arm shares), slower turns, wall."""
    pairs = [(b, a) for b, a in paired_turns(r.turns, base, arm) if a.turn > 0]
    if not pairs:
        return None
    later = nested((a, user_saving(b, a)) for b, a in pairs)
    acc = nested((a, user_saving(b, a)) for b, a in pairs if a.accepted)
    later_x = flat(later)
    slower = [-x for x in later_x if x < 0]
    wall = {x: sum(s.wall_s for s in r.arm_sessions(x)) for x in (base, arm)}
    return {
        "base": base,
        "arm": arm,
        "clusters": n_pairs(later),
        "scenarios": len(later),
        "saved_per_accepted_turn_s": estimate(acc, stats.median, "median", seed=seed),
        "saved_per_later_turn_s": estimate(later, stats.mean, "mean", seed=seed),
        "slower_turns": {
            "n": len(slower),
            "share": len(slower) / len(later_x) if later_x else None,
            "median_s": stats.median(slower) if slower else None,
            "max_s": max(slower) if slower else None,
        },
        "session_wall_reduction": 1 - wall[arm] / wall[base] if wall[base] > 0 else None,
    }


def savings(r: Records, *, seed: int = 0) -> dict[str, Any]:
    """Submit-to-answer latency saved against plain: per accepted turn and over every later turn."""
    pairs = [(p, s) for p, s in paired_turns(r.turns) if s.turn > 0]
    acc = [(p, s) for p, s in pairs if s.accepted]
    saved = estimate(nested((s, answer_saving(p, s)) for p, s in acc), stats.median, "median", seed=seed)
    xs = [answer_saving(p, s) for p, s in acc]
    engine = [s.speculation.time_saved_s for _, s in acc if s.speculation]
    plain_wall = sum(s.wall_s for s in r.arm_sessions("plain"))
    spec_wall = sum(s.wall_s for s in r.arm_sessions("speculative"))
    return {
        "time_saved_s": {
            **saved,
            "mean": stats.mean(xs) if xs else None,
            "engine_reported_median": stats.median(engine) if engine else None,
        },
        # What a user sees on average: every later turn, accepted or not.
        "latency_diff_per_turn_s": estimate(
            nested((s, answer_saving(p, s)) for p, s in pairs), stats.mean, "mean", seed=seed
        ),
        "session_wall_reduction": 1 - spec_wall / plain_wall if plain_wall > 0 else None,
    }


def efficiency(r: Records) -> dict[str, Any]:
    """Measured saving / min(speculation duration, time the user took before submitting), the saving taken
    against suggest when it ran (plain's includes Tab vs typing, which no fork can claim) and capped at the
    ideal: the rest is jitter, not speculation."""
    base = {(p.pair, p.turn): p for p, _ in paired_turns(r.turns, "suggest")} or None
    effs, sv, dur, avail = [], [], [], []
    for p, s in paired_turns(r.turns):
        if not s.accepted or s.speculation is None:
            continue
        if base is not None:
            if (s.pair, s.turn) not in base:
                continue
            p = base[(s.pair, s.turn)]
        d, a = s.speculation.duration_s, s.think_s + s.input_s
        saving = min(answer_saving(p, s), min(d, a))
        if (e := stats.efficiency(saving, d, a)) is not None:
            effs.append(e)
        sv.append(saving)
        dur.append(d)
        avail.append(a)
    acc = [e for e in r.speculations() if e.outcome == "accepted"]
    return {
        "efficiency": {
            "pooled": stats.pooled_efficiency(sv, dur, avail),
            "median": stats.median(effs) if effs else None,
            "n": len(effs),
        },
        # Finished by the time of acceptance (the submit), not merely by promotion: with accept_running="wait"
        # every accepted fork has finished by the time it is promoted.
        "finished_by_accept_share": (
            sum(e.time_to_accept_s is not None and e.duration_s <= e.time_to_accept_s for e in acc) / len(acc)
        )
        if acc
        else None,
    }


def outcomes(r: Records) -> dict[str, Any]:
    """The engine's outcomes and boundaries, and harm: the user's mid-think edits and the conflicts."""
    spec, sugg = r.speculations(), r.suggestions()
    return {
        "user_edits": {
            "turns": sum(bool(t.user_edit) for t in r.arm_turns("speculative")),
            "conflicts": sum(e.outcome == "conflict" for e in spec),
        },
        "speculation_outcomes": count(e.outcome for e in spec),
        "suggestion_outcomes": count(e.outcome for e in sugg),
        "suppressed_reasons": count(e.reason for e in sugg if e.outcome in ("suppressed", "filtered")),
        "boundaries": count(e.boundary for e in spec if e.boundary),
    }


def is_miss(e: BenchSpeculationEvent) -> bool:
    """A fork of a wrong suggestion: the user typed their own prompt and the fork was thrown away."""
    return e.outcome == "aborted" and e.reason == "typed"


def _mean_cost(es: list[BenchSpeculationEvent]) -> dict[str, Any]:
    return {
        "n": len(es),
        "mean_usd": stats.mean([e.cost_usd for e in es]) if es else None,
        "mean_tools": stats.mean([e.tools_run for e in es]) if es else None,
        "mean_duration_s": stats.mean([e.duration_s for e in es]) if es else None,
    }


def fork_costs(r: Records) -> dict[str, Any]:
    """What a fork costs when it is used (a hit) and when it is thrown away (a miss), including what the
    API bills for a request cancelled mid-stream. Misses cut short by the user's submit cost less than
    the same work run to its end; ``miss_completed`` are those that had finished."""
    spec = r.speculations()
    hits = [e for e in spec if e.outcome == "accepted"]
    misses = [e for e in spec if is_miss(e)]
    h, m = _mean_cost(hits), _mean_cost(misses)
    return {
        "hit": h,
        "miss": m,
        "miss_completed": _mean_cost([e for e in misses if e.completed]),
        "miss_to_hit": m["mean_usd"] / h["mean_usd"] if h["mean_usd"] and m["mean_usd"] is not None else None,
    }


def costs(r: Records, total_saved_s: float) -> dict[str, Any]:
    """Tokens and money: what was wasted, how much the forks read from the cache, extra cost per second."""
    spec, sugg = r.speculations(), r.suggestions()
    wasted = [e for e in spec if e.outcome != "accepted"]
    unused = [e for e in sugg if e.outcome != "accepted"]
    fork = tok_sum(e.tokens for e in spec)
    fork_in = fork["input_tokens"] + fork["cache_creation_input_tokens"] + fork["cache_read_input_tokens"]
    by_arm = {a: sum(s.cost_usd for s in r.arm_sessions(a)) for a in ARMS if r.arm_sessions(a)}
    extra = by_arm.get("speculative", 0.0) - by_arm.get("plain", 0.0)
    return {
        "wasted_tokens": sum(sum(e.tokens.values()) for e in wasted),
        "wasted_suggestion_tokens": sum(sum(e.tokens.values()) for e in unused),
        "wasted_cost_usd": sum(e.cost_usd for e in wasted) + sum(e.cost_usd for e in unused),
        "fork_cache_read_share": fork["cache_read_input_tokens"] / fork_in if fork_in else None,
        "cost_usd": by_arm,
        "extra_cost_usd": extra,
        "cost_per_second_saved_usd": extra / total_saved_s if total_saved_s > 0 else None,
        "fork_cost": fork_costs(r),
    }


def overheads(r: Records) -> dict[str, Any]:
    spec, sugg = r.speculations(), r.suggestions()
    acc = [e for e in spec if e.outcome == "accepted"]
    oh = {
        "suggestion_generation": stats.summary([e.generation_s for e in sugg if e.generation_s]),
        "fork_start": stats.summary([e.fork_start_s for e in spec]),
        "overlay_create": stats.summary([e.overlay_create_s for e in spec]),
        "promote": stats.summary([e.promote_s for e in acc]),
        "abort": stats.summary([e.abort_s for e in spec if e.abort_s is not None]),
    }
    parts = [oh["suggestion_generation"]["p50"], oh["fork_start"]["p50"], oh["promote"]["p50"]]
    # Speculation can only start after the suggestion exists and the fork is up, and accepting costs a
    # promotion: below that much think time it cannot save anything (min(duration, think) - overhead).
    model = sum(p for p in parts if p is not None) if parts[0] is not None else None
    return {"overheads_s": oh, "break_even_think_model_s": model}


def analyze(r: Records, *, seed: int = 0) -> dict[str, Any]:
    """Every figure for one slice of the records."""
    out: dict[str, Any] = {"arms": {a: f for a in ARMS if (f := arm_figures(r, a)) is not None}}
    out.update(acceptance(r))
    if "speculative" in out["arms"]:
        out["arms"]["speculative"]["acceptance_rate"] = out["acceptance_rate"]
    out["vs"] = {b: v for b in ("suggest", "plain") if (v := versus(r, b, seed=seed))}
    if "suggest" in out["arms"] and "plain" in out["arms"]:  # what Tab alone buys, for reference
        out["suggest_vs_plain"] = versus(r, "plain", "suggest", seed=seed)
    out.update(savings(r, seed=seed))
    out.update(efficiency(r))
    out.update(outcomes(r))
    total_saved = sum(answer_saving(p, s) for p, s in paired_turns(r.turns) if s.turn > 0)
    out.update(costs(r, total_saved))
    out.update(overheads(r))
    return out
