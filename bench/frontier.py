"""The speculation policy's trade-off across runs: cost over suggest-only against the saving, per acceptance
condition, one point per λ (``--spec-value``) and K (``--spec-candidates``).

    python -m bench.frontier RUN_DIR [RUN_DIR ...] [--plot frontier.png]

prints one Markdown row per condition of every run (what the policy did: forks per shown suggestion,
abstentions; top-K coverage: the share of later turns whose prompt was among the candidates the user saw
when deciding, and among those the model offered, in time or not) and
plots the frontier (bench/plots.py's style). The figures come from each run's summary.json (paired against
the suggest arm of the same condition) and its events.jsonl / turns.jsonl.

These rows are in-sample: the policy ran with the priors it was given. ``--cv`` prints instead the
leave-one-scenario-out frontier of each always-forking run (:mod:`bench.policy_cv`, issue #36): the policy's
history fitted without the scenario it is evaluated on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.records import TurnRecord, dicts, load_events, load_records


def rows_of(run: Path) -> list[dict[str, Any]]:
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    turns = dicts(load_records(run / "turns.jsonl", TurnRecord))
    events = dicts(load_events(run / "events.jsonl"))
    cond_of = {s: t["cond"] for t in turns for s in [t["session"]]}
    sugg: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["kind"] == "suggestion" and e["arm"] == "speculative" and e["session"] in cond_of:
            sugg[cond_of[e["session"]]].append(e)
    out = []
    for block in summary["conditions_detail"]:
        ci = block["cond"]
        arms = block["arms"]
        if "suggest" not in arms or "speculative" not in arms:
            continue
        base, spec = arms["suggest"]["cost_per_turn_usd"], arms["speculative"]["cost_per_turn_usd"]
        saving = (block["vs"].get("suggest") or {}).get("saved_per_later_turn_s") or {}
        decided = [e for e in sugg[ci] if e["decisions"]]
        cands = sum(len(e["decisions"]) for e in decided)
        later = [t for t in turns if t["cond"] == ci and t["arm"] == "speculative" and t["turn"] > 0]
        covered = [
            t
            for t in later
            if (
                t.get("candidate_rank") is not None
                or (t["suggestion_shown"] is not None and t["suggestion_shown"] == t["prompt"])
            )
        ]
        # The model's coverage, timing aside: the next prompt was among the candidates it offered (a record's
        # `turn` N is the suggestion after the N-th prompt, so the prompt it predicts is turn N's, 0-based).
        prompt = {(t["session"], t["turn"]): t["prompt"] for t in turns if t["cond"] == ci}
        offered = [
            e
            for e in sugg[ci]
            if e["text"] and e["outcome"] != "discarded" and (e["session"], e["turn"]) in prompt
        ]
        hit = [e for e in offered if prompt[(e["session"], e["turn"])] in (e["candidates"] or [e["text"]])]
        out.append(
            {
                "run": run.name,
                "label": block["label"],
                "accept_prob": block.get("accept_prob"),
                "spec_value": block.get("spec_value"),
                "spec_k": block.get("spec_k") or 1,
                "suggest_usd_per_turn": base,
                "spec_usd_per_turn": spec,
                "cost_over_suggest": spec / base - 1 if base else None,
                "saving_s": saving.get("mean"),
                "saving_ci95": saving.get("ci95"),
                "acceptance": block.get("acceptance_rate"),
                "coverage": len(covered) / len(later) if later else None,
                "model_coverage": len(hit) / len(offered) if offered else None,
                "forks_per_candidate": (sum(d["fork"] for e in decided for d in e["decisions"]) / cands)
                if cands
                else None,
                "abstained": sum(e["outcome"] == "abstained" for e in sugg[ci]),
                "suggestions": len(decided),
            }
        )
    return out


def table(rows: list[dict[str, Any]]) -> str:
    def f(x: Any, spec: str) -> str:
        return "—" if x is None else format(x, spec)

    lines = [
        "| run | acceptance condition | λ ($/s) | K | suggest $/turn | spec $/turn | cost over suggest | "
        "saving/later turn vs suggest [CI] (s) | acceptance | coverage (in time / offered) | forks per candidate | "
        "abstained |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = r["saving_ci95"]
        acc = "natural" if r["accept_prob"] is None else f"p={r['accept_prob']:g}"
        lines.append(
            f"| {r['run']} | {acc} | {'always' if r['spec_value'] is None else format(r['spec_value'], 'g')} | "
            f"{r['spec_k']} | ${r['suggest_usd_per_turn']:.4f} | ${r['spec_usd_per_turn']:.4f} | "
            f"{f(r['cost_over_suggest'], '+.0%')} | {f(r['saving_s'], '.2f')} "
            f"{'[' + ', '.join(f'{c:.2f}' for c in ci) + ']' if ci else ''} | {f(r['acceptance'], '.0%')} | "
            f"{f(r['coverage'], '.0%')} / {f(r['model_coverage'], '.0%')} | {f(r['forks_per_candidate'], '.0%')} | "
            f"{r['abstained']}/{r['suggestions']} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, series: dict[str, str] | None = None) -> None:
    """One line per (series, acceptance condition, K); a run's series is its name unless ``series`` maps it
    (runs that belong together, e.g. a baseline run and a λ sweep, share a line)."""
    from bench.plots import _finish, plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    by: dict[tuple[str, Any, int], list[dict[str, Any]]] = defaultdict(list)
    names = series or {}
    for r in rows:
        if r["cost_over_suggest"] is not None and r["saving_s"] is not None:
            by[(names.get(r["run"], r["run"]), r["accept_prob"], r["spec_k"])].append(r)
    for (label, acc, k), pts in sorted(by.items(), key=lambda kv: str(kv[0])):
        pts.sort(key=lambda r: r["cost_over_suggest"])
        name = f"{label}: " + ("natural" if acc is None else f"p={acc:g}") + (f", K={k}" if k > 1 else "")
        xs = [100 * r["cost_over_suggest"] for r in pts]
        ys = [r["saving_s"] for r in pts]
        line = ax.plot(xs, ys, marker="o", label=name)[0]
        for r, x, y in zip(pts, xs, ys, strict=True):
            ax.annotate(
                "∞" if r["spec_value"] is None else f"{r['spec_value']:g}",
                (x, y),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
                color=line.get_color(),
            )
    ax.axhline(0, color="black", lw=0.6)
    ax.axvline(0, color="black", lw=0.6)
    _finish(
        fig,
        ax,
        path,
        "cost per turn over suggest-only (%)",
        "mean saving per later turn vs suggest (s)",
        "Cost–latency frontier over λ (points: λ, $ per second saved)",
        legend={"fontsize": 7, "loc": "center right"},
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.frontier", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--plot", type=Path, default=None, metavar="PNG")
    ap.add_argument(
        "--series",
        action="append",
        default=[],
        metavar="RUN=LABEL",
        help="plot run RUN (its directory name) under LABEL; runs with one label share a line",
    )
    ap.add_argument(
        "--cv",
        default=None,
        metavar="VALUES",
        help="λ values (comma-separated): the cross-validated frontier of each always-forking run instead",
    )
    a = ap.parse_args(argv)
    if a.cv is not None:
        from bench import policy_cv

        for run in a.runs:
            print(policy_cv.table(policy_cv.evaluate(run, values=[float(v) for v in a.cv.split(",") if v])))
        return 0
    rows: list[dict[str, Any]] = []
    for run in a.runs:
        try:
            rows += rows_of(run)
        except (OSError, ValueError, KeyError) as e:
            print(f"bench.frontier: error: {run}: {e}", file=sys.stderr)
            return 2
    print(table(rows))
    if a.plot is not None:
        plot(rows, a.plot, dict(x.split("=", 1) for x in a.series if "=" in x))
        print(f"\nplot: {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
