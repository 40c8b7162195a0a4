"""From raw per-turn / per-session / per-event records to the summary JSON (definitions: docs/experiments.md).

Pairing: a speculative turn is compared with the plain (or suggest) turn of the same group (condition,
scenario, rep) and the same index; all arms sent the same prompt. Only complete pairs enter paired figures.
``vs`` holds speculative against each baseline arm: ``suggest`` (same ghost text and Tab, no fork) isolates
what the fork buys; ``plain`` (typing, no suggestions) is what a user without the feature sees.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from bench import stats

TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _tok_sum(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    out = dict.fromkeys(TOKEN_KINDS, 0)
    for d in dicts:
        for k in TOKEN_KINDS:
            out[k] += int(d.get(k) or 0)
    return out


def _summ_opt(xs: list[float]) -> dict[str, Any]:
    return stats.summary(xs)


ARMS = ("plain", "suggest", "speculative")


def paired_turns(turns: list[dict[str, Any]], base: str = "plain", arm: str = "speculative"
                 ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(base, arm) turn pairs with the same pair id and turn index."""
    by: dict[tuple[str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    for t in turns:
        by[(t["pair"], t["turn"])][t["arm"]] = t
    return [(v[base], v[arm]) for _, v in sorted(by.items()) if base in v and arm in v]


def versus(turns: list[dict[str, Any]], sessions: list[dict[str, Any]], base: str, arm: str = "speculative",
           *, seed: int = 0) -> dict[str, Any] | None:
    """``arm`` against ``base``, paired: saving per accepted turn, per later turn, slower turns, wall."""
    pairs = paired_turns(turns, base, arm)
    if not pairs:
        return None
    acc: dict[str, list[float]] = defaultdict(list)
    later: dict[str, list[float]] = defaultdict(list)
    for b, a in pairs:
        if a["turn"] == 0:
            continue
        d = b["latency_s"] + b.get("input_s", 0.0) - a["latency_s"] - a.get("input_s", 0.0)
        later[a["pair"]].append(d)
        if a["accepted"]:
            acc[a["pair"]].append(d)
    acc_x = [x for c in acc.values() for x in c]
    later_x = [x for c in later.values() for x in c]
    slower = [-x for x in later_x if x < 0]
    ci_acc = stats.bootstrap_ci(list(acc.values()), stats.median, seed=seed)
    ci_later = stats.bootstrap_ci(list(later.values()), stats.mean, seed=seed)
    wall = {x: sum(s["wall_s"] for s in sessions if s["arm"] == x) for x in (base, arm)}
    return {
        "base": base, "arm": arm, "clusters": len(later),
        # Input time is included: the user waits for typing too, and Tab is what the suggest arm shares.
        "saved_per_accepted_turn_s": {"n": len(acc_x), "median": stats.median(acc_x) if acc_x else None,
                                      "ci95": list(ci_acc) if ci_acc else None},
        "saved_per_later_turn_s": {"n": len(later_x), "mean": stats.mean(later_x) if later_x else None,
                                   "ci95": list(ci_later) if ci_later else None},
        "slower_turns": {"n": len(slower), "share": len(slower) / len(later_x) if later_x else None,
                         "median_s": stats.median(slower) if slower else None,
                         "max_s": max(slower) if slower else None},
        "session_wall_reduction": 1 - wall[arm] / wall[base] if wall[base] > 0 else None,
    }


def analyze(turns: list[dict[str, Any]], sessions: list[dict[str, Any]], events: list[dict[str, Any]],
            *, seed: int = 0) -> dict[str, Any]:
    """Every figure for one slice of the records (a condition, a scenario, or everything)."""
    ids = {s["session"] for s in sessions}
    turns = [t for t in turns if t["session"] in ids]
    events = [e for e in events if e["session"] in ids]
    spec_ev = [e for e in events if e["kind"] == "speculation" and e["arm"] == "speculative"]
    sugg_ev = [e for e in events if e["kind"] == "suggestion" and e["arm"] == "speculative"]
    pairs = paired_turns(turns)
    out: dict[str, Any] = {"arms": {}}

    for arm in ARMS:
        ts = [t for t in turns if t["arm"] == arm]
        ss = [s for s in sessions if s["arm"] == arm]
        if not ss:
            continue
        ev = [e for e in events if e["arm"] == arm]
        cost = sum(s["cost_usd"] for s in ss)
        out["arms"][arm] = {
            "sessions": len(ss), "turns": len(ts), "errors": sum(bool(t["error"]) for t in ts),
            "turn_latency_s": _summ_opt([t["latency_s"] for t in ts]),
            "session_wall_s": _summ_opt([s["wall_s"] for s in ss]),
            "accepted": sum(t["accepted"] for t in ts),
            "cost_usd": cost, "cost_per_turn_usd": cost / len(ts) if ts else None,
            "tokens": {
                "main": _tok_sum(t["tokens"] for t in ts),
                "suggestion": _tok_sum(e["tokens"] for e in ev if e["kind"] == "suggestion"),
                "speculation": _tok_sum(e["tokens"] for e in ev if e["kind"] == "speculation"),
            },
        }

    # Acceptance: turns after the first, in the speculative arm.
    later = [t for t in turns if t["arm"] == "speculative" and t["turn"] > 0]
    # A suggestion counts if it was visible when the user looked up or appeared while they typed: in each
    # case the user could have taken it.
    had = [t for t in later if t["suggestion_shown"] is not None or t.get("suggestion_at_submit") is not None
           or t["accepted"]]
    accepted = [t for t in later if t["accepted"]]
    out["accepted"] = len(accepted)
    out["suggestion_coverage"] = len(had) / len(later) if later else None
    # Under a forced hit rate: the wrong suggestions' kinds (speculate.sim.draw), so cheap misses show.
    out["miss_kinds"] = dict(Counter(t["miss_kind"] for t in later if t.get("miss_kind")))
    out["acceptance_rate"] = len(accepted) / len(had) if had else None
    if "speculative" in out["arms"]:
        out["arms"]["speculative"]["acceptance_rate"] = out["acceptance_rate"]
    out["vs"] = {b: v for b in ("suggest", "plain") if (v := versus(turns, sessions, b, seed=seed))}
    if "suggest" in out["arms"] and "plain" in out["arms"]:  # what Tab alone buys, for reference
        out["suggest_vs_plain"] = versus(turns, sessions, "plain", "suggest", seed=seed)
    out["accepted_by_input"] = {k: sum(t["input"] == k for t in accepted) for k in ("tab", "typed")}

    # Time saved: paired difference on accepted turns, CI clustered by pair (session).
    acc_pairs = [(p, s) for p, s in pairs if s["accepted"]]
    clusters: dict[str, list[float]] = defaultdict(list)
    for p, s in acc_pairs:
        clusters[s["pair"]].append(p["latency_s"] - s["latency_s"])
    saved = [x for c in clusters.values() for x in c]
    ci = stats.bootstrap_ci(list(clusters.values()), stats.median, seed=seed)
    engine_saved = [s["speculation"]["time_saved_s"] for _, s in acc_pairs if s["speculation"]]
    out["time_saved_s"] = {
        "n": len(saved), "median": stats.median(saved) if saved else None,
        "mean": stats.mean(saved) if saved else None, "ci95": list(ci) if ci else None,
        "engine_reported_median": stats.median(engine_saved) if engine_saved else None,
    }
    # Per-turn effect over all later turns (accepted or not): what a user sees on average.
    diff_clusters: dict[str, list[float]] = defaultdict(list)
    for p, s in pairs:
        if s["turn"] > 0:
            diff_clusters[s["pair"]].append(p["latency_s"] - s["latency_s"])
    diffs = [x for c in diff_clusters.values() for x in c]
    ci_mean = stats.bootstrap_ci(list(diff_clusters.values()), stats.mean, seed=seed)
    out["latency_diff_per_turn_s"] = {"n": len(diffs), "mean": stats.mean(diffs) if diffs else None,
                                      "ci95": list(ci_mean) if ci_mean else None}
    plain_wall = sum(s["wall_s"] for s in sessions if s["arm"] == "plain")
    spec_wall = sum(s["wall_s"] for s in sessions if s["arm"] == "speculative")
    out["session_wall_reduction"] = 1 - spec_wall / plain_wall if plain_wall > 0 else None

    # Efficiency = measured saving / min(speculation duration, time the user took before submitting), with
    # the saving taken against the suggest arm when it ran (plain's saving includes Tab vs typing, which
    # no fork can claim), and capped at the ideal: the rest is jitter, not speculation.
    eff_base = {(p["pair"], p["turn"]): p for p, _ in paired_turns(turns, "suggest")} or None
    effs, sv, dur, avail = [], [], [], []
    for p, s in acc_pairs:
        rec = s["speculation"]
        if not rec:
            continue
        if eff_base is not None:
            if (s["pair"], s["turn"]) not in eff_base:
                continue
            p = eff_base[(s["pair"], s["turn"])]
        d, a = rec["duration_s"], s["think_s"] + s["input_s"]
        saving = min(p["latency_s"] - s["latency_s"], min(d, a))
        e = stats.efficiency(saving, d, a)
        if e is not None:
            effs.append(e)
        sv.append(saving)
        dur.append(d)
        avail.append(a)
    out["efficiency"] = {"pooled": stats.pooled_efficiency(sv, dur, avail),
                         "median": stats.median(effs) if effs else None, "n": len(effs)}
    acc_spec = [e for e in spec_ev if e["outcome"] == "accepted"]
    # Finished by the time of acceptance (the submit), not merely by promotion: with accept_running="wait"
    # every accepted fork has finished by the time it is promoted.
    out["finished_by_accept_share"] = (
        sum(e["time_to_accept_s"] is not None and e["duration_s"] <= e["time_to_accept_s"] for e in acc_spec)
        / len(acc_spec)) if acc_spec else None

    # Harm: the user's mid-think edits, and the speculations they cost (conflict on accept).
    spec_turns = [t for t in turns if t["arm"] == "speculative"]
    out["user_edits"] = {"turns": sum(bool(t.get("user_edit")) for t in spec_turns),
                         "conflicts": sum(e["outcome"] == "conflict" for e in spec_ev)}

    # Outcomes and boundaries.
    out["speculation_outcomes"] = _count(e["outcome"] for e in spec_ev)
    out["suggestion_outcomes"] = _count(e["outcome"] for e in sugg_ev)
    out["suppressed_reasons"] = _count(e["reason"] for e in sugg_ev if e["outcome"] in ("suppressed", "filtered"))
    out["boundaries"] = _count(e["boundary"] for e in spec_ev if e["boundary"])

    # Tokens and cost.
    wasted = [e for e in spec_ev if e["outcome"] != "accepted"]
    out["wasted_tokens"] = sum(sum(int(v or 0) for v in e["tokens"].values()) for e in wasted)
    out["wasted_suggestion_tokens"] = sum(sum(int(v or 0) for v in e["tokens"].values())
                                          for e in sugg_ev if e["outcome"] != "accepted")
    out["wasted_cost_usd"] = sum(e["cost_usd"] for e in wasted) + sum(
        e["cost_usd"] for e in sugg_ev if e["outcome"] != "accepted")
    fork = _tok_sum(e["tokens"] for e in spec_ev)
    fork_in = fork["input_tokens"] + fork["cache_creation_input_tokens"] + fork["cache_read_input_tokens"]
    out["fork_cache_read_share"] = fork["cache_read_input_tokens"] / fork_in if fork_in else None
    out["cost_usd"] = {a: out["arms"][a]["cost_usd"] for a in ARMS if a in out["arms"]}
    extra = out["cost_usd"].get("speculative", 0.0) - out["cost_usd"].get("plain", 0.0)
    total_saved = sum(diffs)
    out["extra_cost_usd"] = extra
    out["cost_per_second_saved_usd"] = extra / total_saved if total_saved > 0 else None

    # Overheads.
    out["overheads_s"] = {
        "suggestion_generation": _summ_opt([e["generation_s"] for e in sugg_ev if e["generation_s"]]),
        "fork_start": _summ_opt([e["fork_start_s"] for e in spec_ev]),
        "overlay_create": _summ_opt([e["overlay_create_s"] for e in spec_ev]),
        "promote": _summ_opt([e["promote_s"] for e in acc_spec]),
        "abort": _summ_opt([e["abort_s"] for e in spec_ev if e.get("abort_s") is not None]),
    }
    oh = out["overheads_s"]
    parts = [oh["suggestion_generation"]["p50"], oh["fork_start"]["p50"], oh["promote"]["p50"]]
    # Speculation can only start after the suggestion exists and the fork is up, and accepting costs a
    # promotion: below that much think time it cannot save anything (min(duration, think) - overhead).
    out["break_even_think_model_s"] = sum(p for p in parts if p is not None) if parts[0] is not None else None
    return out


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return dict(sorted(out.items()))


def build_summary(*, turns: list[dict[str, Any]], sessions: list[dict[str, Any]], events: list[dict[str, Any]],
                  meta: dict[str, Any], canary_leaks: list[str] | None = None) -> dict[str, Any]:
    """The summary JSON: the first condition's figures at top level, then per scenario and per condition."""
    conds = meta.get("conditions", [])
    seed = int(meta.get("seed", 0))
    by_cond: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in sessions:
        by_cond[s["cond"]].append(s)
    first = min(by_cond) if by_cond else 0
    main = analyze(turns, by_cond.get(first, []), events, seed=seed)
    leak_count = sum(len(s["leaks"]) for s in sessions) + len(canary_leaks or [])
    pairs: dict[str, dict[str, str]] = defaultdict(dict)
    for s in sessions:
        pairs[s["pair"]][s["arm"]] = s["final_tree"]
    divergent = sorted(k for k, v in pairs.items() if len(set(v.values())) > 1)
    summary: dict[str, Any] = {
        **{k: meta[k] for k in meta},
        "primary_condition": conds[first] if first < len(conds) else None,
        **main,
        "leaks": leak_count,
        "leak_details": [{"session": s["session"], **lk} for s in sessions for lk in s["leaks"]]
        + [{"canary": c} for c in (canary_leaks or [])],
        "tree_divergence": divergent,
        # Every condition's turns: a model error or an unmet tool-result expectation (the run exits non-zero).
        "turn_errors": [{"session": t["session"], "turn": t["turn"], "error": t["error"]}
                        for t in turns if t.get("error")],
        "per_scenario": {},
        "conditions_detail": [],
    }
    for name in sorted({s["scenario"] for s in by_cond.get(first, [])}):
        sub = [s for s in by_cond[first] if s["scenario"] == name]
        summary["per_scenario"][name] = analyze(turns, sub, events, seed=seed)
    for ci in sorted(by_cond):
        block = analyze(turns, by_cond[ci], events, seed=seed)
        label = conds[ci] if ci < len(conds) else str(ci)
        summary["conditions_detail"].append({"cond": ci, "label": label, **_cond_params(meta, ci), **block})
    summary["break_even_think_s"] = _sweep_break_even(summary["conditions_detail"], meta, turns, by_cond, seed)
    return summary


def _cond_params(meta: dict[str, Any], ci: int) -> dict[str, Any]:
    params = meta.get("condition_params", [])
    return params[ci] if ci < len(params) else {}


def _sweep_break_even(blocks: list[dict[str, Any]], meta: dict[str, Any], turns: list[dict[str, Any]],
                      by_cond: dict[int, list[dict[str, Any]]], seed: int) -> dict[str, Any]:
    """Mean per-turn saving (against suggest when it ran, else plain) against fixed think time (wall s);
    break-even where the interpolated curve first reaches zero, with a bootstrap CI over sessions."""
    scale = float(meta.get("time_scale", 1.0))
    rows = []
    for b in blocks:
        if b.get("think_fixed_s") is None or b.get("accept_prob") is not None:
            continue
        v = b["vs"].get("suggest") or b["vs"].get("plain")
        if v is None or v["saved_per_later_turn_s"]["mean"] is None:
            continue
        ids = {x["session"] for x in by_cond.get(b["cond"], [])}
        clusters: dict[str, list[float]] = defaultdict(list)
        for p, q in paired_turns([t for t in turns if t["session"] in ids], v["base"]):
            if q["turn"] > 0:
                clusters[q["pair"]].append(p["latency_s"] + p.get("input_s", 0.0) - q["latency_s"]
                                           - q.get("input_s", 0.0))
        rows.append((b["think_fixed_s"] * scale, v["saved_per_later_turn_s"]["mean"], v["base"],
                     list(clusters.values())))
    rows.sort(key=lambda r: r[0])
    xs, ys = [r[0] for r in rows], [r[1] for r in rows]
    point = stats.break_even(xs, ys) if len(rows) >= 2 else None
    ci = stats.break_even_ci(xs, [r[3] for r in rows], seed=seed) if len(rows) >= 2 else None
    return {"curve": [{"think_s": x, "mean_saving_per_turn_s": y, "base": base} for x, y, base, _ in rows],
            "sweep": point, "ci95": [c if math.isfinite(c) else None for c in ci] if ci else None,  # None: never
            # At or above zero already at the smallest swept think time: the break-even is at most that.
            "at_most": bool(rows) and ys[0] >= 0}
