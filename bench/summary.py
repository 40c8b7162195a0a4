"""From validated records to the summary JSON (definitions: docs/experiments.md).

The first condition's figures are at the top level, then every scenario of it (``per_scenario``) and every
condition (``conditions_detail``), the think-sweep break-even, and integrity (leaks, divergent trees, turn
errors). ``vs`` holds speculative against each baseline arm: ``suggest`` (same ghost text and Tab, no fork)
isolates what the fork buys; ``plain`` (typing, no suggestions) is what a user without the feature sees.
The figures themselves are in :mod:`bench.figures`, pairing and clustering in :mod:`bench.pairs`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from bench import honest, stats
from bench.figures import analyze
from bench.pairs import CI_METHOD, Records, nested, paired_turns, user_saving
from bench.records import SessionRecord


def build_summary(
    *, records: Records, meta: dict[str, Any], canary_leaks: list[str] | None = None
) -> dict[str, Any]:
    """The summary JSON: the first condition's figures at top level, then per scenario and per condition."""
    conds = meta.get("conditions", [])
    seed = int(meta.get("seed", 0))
    by_cond: dict[int, list[SessionRecord]] = defaultdict(list)
    for s in records.sessions:
        by_cond[s.cond].append(s)
    first = min(by_cond) if by_cond else 0
    primary = records.only(by_cond.get(first, []))
    leak_count = sum(len(s.leaks) for s in records.sessions) + len(canary_leaks or [])
    trees: dict[str, dict[str, str]] = defaultdict(dict)
    for s in records.sessions:
        trees[s.pair][s.arm] = s.final_tree
    summary: dict[str, Any] = {
        **meta,
        "primary_condition": conds[first] if first < len(conds) else None,
        "ci_method": CI_METHOD,
        **analyze(primary, seed=seed),
        "honest": honest.figures(primary, _cond_params(meta, first)),
        "leaks": leak_count,
        "leak_details": [{"session": s.session, **lk} for s in records.sessions for lk in s.leaks]
        + [{"canary": c} for c in (canary_leaks or [])],
        "tree_divergence": sorted(k for k, v in trees.items() if len(set(v.values())) > 1),
        # Every condition's turns: a model error or an unmet tool-result expectation (the run exits non-zero).
        "turn_errors": [
            {"session": t.session, "turn": t.turn, "error": t.error} for t in records.turns if t.error
        ],
        "per_scenario": {},
        "conditions_detail": [],
    }
    for name in sorted({s.scenario for s in primary.sessions}):
        summary["per_scenario"][name] = analyze(
            primary.only(s for s in primary.sessions if s.scenario == name), seed=seed
        )
    for ci in sorted(by_cond):
        label = conds[ci] if ci < len(conds) else str(ci)
        summary["conditions_detail"].append(
            {
                "cond": ci,
                "label": label,
                **_cond_params(meta, ci),
                **analyze(records.only(by_cond[ci]), seed=seed),
                "honest": honest.figures(records.only(by_cond[ci]), _cond_params(meta, ci)),
            }
        )
    summary["break_even_think_s"] = sweep_break_even(
        summary["conditions_detail"], meta, records, by_cond, seed
    )
    return summary


def _cond_params(meta: dict[str, Any], ci: int) -> dict[str, Any]:
    params = meta.get("condition_params", [])
    return params[ci] if ci < len(params) else {}


def sweep_break_even(
    blocks: list[dict[str, Any]],
    meta: dict[str, Any],
    records: Records,
    by_cond: dict[int, list[SessionRecord]],
    seed: int,
) -> dict[str, Any]:
    """Mean per-turn saving (against suggest when it ran, else plain) against fixed think time (wall s);
    break-even where the interpolated curve first reaches zero, with a hierarchical bootstrap CI."""
    scale = float(meta.get("time_scale", 1.0))
    rows = []
    for b in blocks:
        if b.get("think_fixed_s") is None or b.get("accept_prob") is not None or not _is_base(b, meta):
            continue
        v = b["vs"].get("suggest") or b["vs"].get("plain")
        if v is None or v["saved_per_later_turn_s"]["mean"] is None:
            continue
        sub = records.only(by_cond.get(b["cond"], []))
        groups = nested((q, user_saving(p, q)) for p, q in paired_turns(sub.turns, v["base"]) if q.turn > 0)
        rows.append((b["think_fixed_s"] * scale, v["saved_per_later_turn_s"]["mean"], v["base"], groups))
    rows.sort(key=lambda r: r[0])
    xs, ys = [r[0] for r in rows], [r[1] for r in rows]
    point = stats.break_even(xs, ys) if len(rows) >= 2 else None
    ci = stats.break_even_ci(xs, [r[3] for r in rows], seed=seed) if len(rows) >= 2 else None
    return {
        "curve": [{"think_s": x, "mean_saving_per_turn_s": y, "base": base} for x, y, base, _ in rows],
        "sweep": point,
        "ci95": [c if math.isfinite(c) else None for c in ci] if ci else None,  # None: never
        # At or above zero already at the smallest swept think time: the break-even is at most that.
        "at_most": bool(rows) and ys[0] >= 0,
    }


def _is_base(block: dict[str, Any], meta: dict[str, Any]) -> bool:
    """A condition on the primary profile and typing speed: the think sweep varies think time only."""
    params = meta.get("condition_params") or [{}]
    first = params[0]
    return all(
        block.get(k) == first.get(k) for k in ("model_name", "typing_cps", "tab_s", "sim") if k in first
    )
