"""Writing a run's results: summary.json, report.md (its tables and cells are :mod:`bench.tables`') and the
PNG plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.pairs import Records
from bench.records import SessionRecord, TurnRecord, load_events, load_records
from bench.summary import build_summary
from bench.tables import ci, f, headline_table, later_cell, misses_cell, pct, sensitivity_table, table, usd


def render_markdown(s: dict[str, Any]) -> str:
    run = s["run"]
    lines = [
        f"# speculate bench — {s['run_id']}",
        "",
        f"Backend `{s['backend']}`, seed {s['seed']}, time scale {s['time_scale']:g}, "
        f"{s['reps']} rep(s), scenarios: {', '.join(s['scenarios'])}. "
        f"Sessions ran {s['concurrency']} at a time on {s['cpus']} CPU(s), arms paired and interleaved. "
        f"Run wall time {run['wall_s']:.0f} s; {run['sessions']} sessions finished"
        + (", **interrupted** (partial results)" if run["interrupted"] else "")
        + (f", {len(run['failures'])} failed" if run["failures"] else "")
        + ".",
        "",
        f"Primary condition: `{s['primary_condition']}`. All times are wall-clock seconds"
        + (
            f" (the simulator and the simulated user run at {s['time_scale']:g}× real time, tool commands at "
            "real speed: these are not user seconds, see docs/experiments.md, Design)."
            if s["time_scale"] != 1
            else ", a user's seconds."
        ),
        "",
        "## Headline",
        "",
        *headline_table(s),
    ]

    lines += ["## Per scenario", ""]
    rows = []
    for name, b in s["per_scenario"].items():
        rows.append(
            [
                name,
                f(b["arms"]["plain"]["turns"]),
                f(b["arms"]["plain"]["turn_latency_s"]["p50"]),
                f(b["arms"]["speculative"]["turn_latency_s"]["p50"]),
                f(b["accepted"]),
                pct(b["acceptance_rate"]),
                f(b["time_saved_s"]["median"]),
                ci(b["time_saved_s"]["ci95"]),
                later_cell(b, "suggest"),
                later_cell(b, "plain"),
                usd(b["arms"]["plain"]["cost_per_turn_usd"]),
                usd(b["arms"]["speculative"]["cost_per_turn_usd"]),
            ]
        )
    lines += table(
        [
            "scenario",
            "turns/arm",
            "plain p50",
            "spec p50",
            "accepted",
            "acceptance",
            "saved p50",
            "saved CI",
            "per later turn vs suggest [CI]",
            "vs plain [CI]",
            "plain $/turn",
            "spec $/turn",
        ],
        rows,
    )

    lines += ["## Outcomes and boundaries", ""]
    rows = [[f"suggestion: {k}", str(v)] for k, v in s["suggestion_outcomes"].items()]
    rows += [[f"suppressed/filtered: {k}", str(v)] for k, v in s["suppressed_reasons"].items()]
    rows += [[f"speculation: {k}", str(v)] for k, v in s["speculation_outcomes"].items()]
    rows += [[f"boundary: {k}", str(v)] for k, v in s["boundaries"].items()]
    rows += [
        ["accepted speculations finished by the time of acceptance", pct(s["finished_by_accept_share"])],
        [
            "accepted with Tab / by typing the same text",
            f"{s['accepted_by_input']['tab']} / {s['accepted_by_input']['typed']}",
        ],
    ]
    lines += table(["outcome", "count"], rows)

    lines += ["## Tokens by kind", ""]
    rows = []
    for arm in s["arms"]:
        for part, tok in s["arms"][arm]["tokens"].items():
            if any(tok.values()):
                rows.append(
                    [
                        arm,
                        part,
                        *(
                            f(tok[k])
                            for k in (
                                "input_tokens",
                                "cache_creation_input_tokens",
                                "cache_read_input_tokens",
                                "output_tokens",
                            )
                        ),
                    ]
                )
    lines += table(["arm", "requests", "input", "cache write", "cache read", "output"], rows)
    lines += [
        f"Wasted suggestion tokens: {s['wasted_suggestion_tokens']}; wasted cost "
        f"{usd(s['wasted_cost_usd'])}; total cost plain {usd(s['cost_usd']['plain'])}, speculative "
        f"{usd(s['cost_usd']['speculative'])}.",
        "",
    ]

    lines += ["## Overheads (s)", ""]
    rows = [
        [k.replace("_", " "), f(v["n"]), f(v["p50"], digits=4), f(v["p90"], digits=4)]
        for k, v in s["overheads_s"].items()
    ]
    lines += table(["overhead", "n", "p50", "p90"], rows)
    be = s["break_even_think_s"]
    sweep = "—" if be["sweep"] is None else ("≤ " if be.get("at_most") else "") + f(be["sweep"])
    lines += [
        f"Break-even think time: model estimate {f(s['break_even_think_model_s'])} s "
        f"(suggestion + fork start + promotion); from the think sweep {sweep} s "
        f"{ci(be.get('ci95'))} (interpolated; 95% CI by resampling sessions per swept think time).",
        "",
    ]

    if s.get("sensitivity"):
        lines += ["## Sensitivity", "", *sensitivity_table(s)]
    if len(s["conditions_detail"]) > 1:
        lines += ["## Sweep", ""]
        rows = []
        for b in s["conditions_detail"]:
            rows.append(
                [
                    f"`{b['label']}`",
                    pct(b["acceptance_rate"]),
                    pct(b["suggestion_coverage"]),
                    later_cell(b, "suggest"),
                    later_cell(b, "plain"),
                    f(b["arms"]["plain"]["turn_latency_s"]["p50"]),
                    f(b["arms"]["speculative"]["turn_latency_s"]["p50"]),
                    pct(b["efficiency"]["pooled"]),
                    usd(b["arms"]["plain"]["cost_per_turn_usd"]),
                    usd(b["arms"]["speculative"]["cost_per_turn_usd"]),
                    misses_cell(b),
                ]
            )
        lines += table(
            [
                "condition",
                "acceptance",
                "coverage",
                "saving per later turn vs suggest [CI]",
                "vs plain [CI]",
                "plain p50",
                "spec p50",
                "efficiency",
                "plain $/turn",
                "spec $/turn",
                "misses (candidate / later turn / unscripted)",
            ],
            rows,
        )
        lines += [
            "Forced conditions (`p=…`) set the share of suggestions that are the user's next prompt; a miss "
            "is a scenario's wrong candidate, a later turn's prompt (both run real work in the fork), or, "
            "where neither exists, an unscripted prompt the fork answers at once (a cheap miss).",
            "",
        ]
        lines += ["![saving vs acceptance](saving_vs_acceptance.png)", ""]

    lines += [
        "## Integrity",
        "",
        f"- Leaks into a real tree outside acceptance: **{s['leaks']}** (canary hashes of every session's "
        "project before each submit and after close, and of the bundled workspaces before/after the run).",
        f"- Harm: the simulated user edited a file mid-think before {s['user_edits']['turns']} speculative-arm "
        f"turn(s) (probability {s.get('user_edit_prob', '—')}, an assumption); speculations discarded on "
        f"conflict: {s['user_edits']['conflicts']}; turns slower than their paired suggest/plain turn: "
        + ", ".join(
            f"vs {b} {v['slower_turns']['n']} (max {f(v['slower_turns']['max_s'])} s)"
            for b, v in s.get("vs", {}).items()
        )
        + ".",
        f"- Pairs whose final trees differ between arms: {len(s['tree_divergence'])}"
        + (f" ({', '.join(s['tree_divergence'])})" if s["tree_divergence"] else "")
        + ".",
        "- Turn errors: " + ", ".join(f"{a} {v['errors']}" for a, v in s["arms"].items()) + "; "
        f"failed sessions: {len(run['failures'])}.",
        *(f"  - `{e['session']}` turn {e['turn'] + 1}: {e['error']}" for e in s.get("turn_errors", [])[:50]),
        "",
        "## Plots",
        "",
        "![latency CDF](latency_cdf.png)",
        "",
        "![time saved vs think time](time_saved_vs_think.png)",
        "",
        "![cost vs latency](cost_vs_latency.png)",
        "",
    ]
    return "\n".join(lines)


def load_run(out: Path) -> Records:
    """A run's validated records (turns, sessions, events), from its directory."""
    return Records(
        load_records(out / "turns.jsonl", TurnRecord),
        load_records(out / "sessions.jsonl", SessionRecord),
        load_events(out / "events.jsonl"),
    )


def write_report(out: Path, meta: dict[str, Any], *, canary_leaks: list[str] | None = None) -> dict[str, Any]:
    """Read the run's JSONL files in ``out`` and write summary.json, report.md and the plots."""
    records = load_run(out)
    summary = build_summary(records=records, meta=meta, canary_leaks=canary_leaks)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    (out / "report.md").write_text(render_markdown(summary), encoding="utf-8")
    if records.turns:
        try:  # plotting is an optional extra (`.[plot]`, installed by scripts/setup.sh): the figures stand alone
            from bench.plots import write_plots
        except ImportError as e:
            print(f"bench: no plots written to {out}: {e} (pip install -e '.[plot]')", file=sys.stderr)
        else:
            write_plots(out, records, summary)
    return summary
