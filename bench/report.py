"""Writing a run's results: summary.json, report.md (tables) and the PNG plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.pairs import Records
from bench.records import SessionRecord, TurnRecord, load_events, load_records
from bench.summary import build_summary


def f(x: Any, unit: str = "", digits: int = 2) -> str:
    """A table cell: numbers rounded, None as an em dash."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}{unit}"
    return f"{x}{unit}"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def usd(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def ci(c: list[float] | None) -> str:
    return "—" if not c else "[" + ", ".join("∞" if x is None else f"{x:.2f}" for x in c) + "]"


def _later(b: dict[str, Any], base: str) -> str:
    v = b.get("vs", {}).get(base)
    return "—" if v is None else f"{f(v['saved_per_later_turn_s']['mean'])} {ci(v['saved_per_later_turn_s']['ci95'])}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows), ""]


MIN_CLUSTERS = 10  # below this, the report says the cluster-bootstrap CIs are rough


def acceptance_table(s: dict[str, Any]) -> list[str]:
    """Saving against acceptance, one row per condition of a sweep (the natural condition marked)."""
    legacy = "ci_method" not in s  # made before issue #24: pair-level CIs, no fork costs
    rows = []
    blocks = sorted(s["conditions_detail"], key=lambda b: (b["accept_prob"] is not None, b["accept_prob"] or 0))
    for b in blocks:
        name = ("natural: the scenarios' own weights" if b["accept_prob"] is None
                else f"forced: {100 * b['accept_prob']:.0f}% of suggestions are the next prompt")
        vs = b.get("vs", {}).get("suggest") or {}
        acc = vs.get("saved_per_accepted_turn_s") or {}
        clusters = f(vs.get("clusters")) if legacy else f"{f(vs.get('scenarios'))} / {f(vs.get('clusters'))}"
        cost = [usd(b["arms"]["speculative"]["cost_per_turn_usd"])]
        if not legacy:
            cost.append(pct((b.get("fork_cost") or {}).get("miss_to_hit")))
        rows.append([name, pct(b["acceptance_rate"]), pct(b["suggestion_coverage"]), clusters,
                     f"{f(acc.get('median'))} {ci(acc.get('ci95'))}", _later(b, "suggest"), _later(b, "plain"),
                     *cost, _misses(b)])
    header = ["condition", "acceptance", "coverage", "clusters" if legacy else "scenarios / pairs",
              "saved per accepted turn vs suggest, median [CI] (s)", "saved per later turn vs suggest, mean [CI] "
              "(s)", "vs plain [CI] (s)", "speculative $/turn", *([] if legacy else ["miss fork cost / hit"]),
              "misses (candidate / later turn / unscripted)"]
    return _table(header, rows) + ([] if legacy else [*_pooled_fork_cost(blocks), CI_NOTE, ""])


def _pooled_fork_cost(blocks: list[dict[str, Any]]) -> list[str]:
    """Hits and misses of every condition together: is a thrown-away fork as costly as a used one?"""
    pooled = {}
    for kind in ("hit", "miss", "miss_completed"):
        parts = [(b["fork_cost"][kind]["n"], b["fork_cost"][kind]["mean_usd"]) for b in blocks
                 if b.get("fork_cost") and b["fork_cost"][kind]["n"]]
        n = sum(k for k, _ in parts)
        pooled[kind] = (n, sum(k * m for k, m in parts) / n if n else None)
    (nh, h), (nm, m), (nc, c) = pooled["hit"], pooled["miss"], pooled["miss_completed"]
    if not nh or not nm:
        return []
    return [f"Fork cost over all conditions: a hit {usd(h)} (n={nh}), a miss {usd(m)} (n={nm}, "
            f"{pct(m / h)} of a hit; billed as the API bills, cut requests included), a miss that had finished "
            f"{usd(c)} (n={nc}).", ""]


SENSITIVITY_ROWS = (("think_median_s", "think time median", "s"), ("model_name", "model profile", ""),
                    ("typing_cps", "typing speed", " chars/s"), ("tab_s", "Tab to accept", " s"),
                    ("sim", "simulator", ""))


def sensitivity_table(s: dict[str, Any]) -> list[str]:
    """One row per condition of a ``--sensitivity`` run: the assumption it changes from the first (base)
    condition, the saving per later turn against suggest and plain, and the cost against plain."""
    blocks = s.get("conditions_detail") or []
    if not blocks:
        return []
    base = blocks[0]
    rows = []
    for b in blocks:
        changed = [f"{label} {b.get(k)}{unit}" for k, label, unit in SENSITIVITY_ROWS if b.get(k) != base.get(k)]
        arms = b["arms"]
        plain, spec = arms.get("plain", {}).get("cost_per_turn_usd"), arms.get("speculative", {}).get("cost_per_turn_usd")
        extra = f"{100 * (spec - plain) / plain:+.0f}%" if plain and spec is not None else "—"
        rows.append(["base: " + _base_label(b) if b is base else ", ".join(changed) or "(same as base)",
                     pct(b["acceptance_rate"]), _later(b, "suggest"), _later(b, "plain"),
                     f"{usd(spec)} ({extra})", pct((b.get("fork_cost") or {}).get("miss_to_hit"))])
    header = ["condition (what differs from the base)", "acceptance", "saved per later turn vs suggest, mean [CI] "
              "(s)", "vs plain [CI] (s)", "speculative $/turn (vs plain)", "miss fork cost / hit"]
    return [*_table(header, rows), CI_NOTE, ""]


def _base_label(b: dict[str, Any]) -> str:
    return ", ".join(f"{label} {b.get(k)}{unit}" for k, label, unit in SENSITIVITY_ROWS if b.get(k) is not None)


def headline_table(s: dict[str, Any]) -> list[str]:
    """The table the README shows: per arm latency, wall time and cost, and what speculation bought."""
    arms = [a for a in ("plain", "suggest", "speculative") if a in s["arms"]]

    def row(name: str, get: Any, fmt: Any = f) -> list[str]:
        vals = [get(s["arms"][a]) for a in arms]
        a, b = vals[0], vals[-1]
        delta = "—"
        if isinstance(a, int | float) and isinstance(b, int | float) and a:
            delta = f"{100 * (b - a) / a:+.0f}%"
        return [name, *(fmt(v) for v in vals), delta]

    rows = [row(f"turn latency {q} (s)", lambda x, q=q: x["turn_latency_s"][q]) for q in ("p50", "p90", "p99")]
    rows += [row("session wall p50 (s)", lambda x: x["session_wall_s"]["p50"]),
             row("cost per turn (USD)", lambda x: x["cost_per_turn_usd"], usd),
             row("turn errors", lambda x: x["errors"])]
    lines = _table(["", *arms, f"Δ {arms[-1]} vs {arms[0]}"], rows)
    lines += versus_table(s)
    ts = s["time_saved_s"]
    lines += _table(["speculation", "value"], [
        ["accepted / acceptance rate / coverage",
         f"{s['accepted']} / {pct(s['acceptance_rate'])} / {pct(s['suggestion_coverage'])}"],
        ["submit-to-answer latency saved per accepted turn vs plain, median [95% CI] (s)",
         f"{f(ts['median'])} {ci(ts['ci95'])}"],
        ["mean submit-to-answer saving per later turn vs plain [95% CI] (s)",
         f"{f(s['latency_diff_per_turn_s']['mean'])} {ci(s['latency_diff_per_turn_s']['ci95'])}"],
        ["efficiency (pooled / median)", f"{pct(s['efficiency']['pooled'])} / {pct(s['efficiency']['median'])}"],
        ["fork input read from cache", pct(s["fork_cache_read_share"])],
        ["wasted tokens (ignored speculations)", f(s["wasted_tokens"])],
        ["extra cost / cost per second saved", f"{usd(s['extra_cost_usd'])} / {usd(s['cost_per_second_saved_usd'])}"],
        *fork_cost_line(s),
        ["leaks into the real tree", f(s["leaks"])],
    ])
    return lines


def versus_table(s: dict[str, Any]) -> list[str]:
    """Paired savings (base − arm, input time included) of speculative against suggest and plain."""
    blocks = [(f"speculative vs {b}", v) for b, v in s.get("vs", {}).items()]
    if s.get("suggest_vs_plain"):
        blocks.append(("suggest vs plain (Tab alone)", s["suggest_vs_plain"]))
    if not blocks:
        return []
    if not any("scenarios" in v for _, v in blocks):
        return _legacy_versus_table(blocks)
    rows = []
    for name, v in blocks:
        acc, later, slow = v["saved_per_accepted_turn_s"], v["saved_per_later_turn_s"], v["slower_turns"]
        rows.append([name, f"{f(v['scenarios'])} / {f(v['clusters'])}",
                     f"{f(acc['median'])} {ci(acc['ci95'])} (n={acc['n']})",
                     f"{f(later['mean'])} {ci(later['ci95'])} (n={later['n']})", ci(later.get("ci95_pairs")),
                     f"{slow['n']} ({pct(slow['share'])}), max {f(slow['max_s'])} s",
                     pct(v["session_wall_reduction"])])
    lines = _table(["paired comparison", "scenarios / pairs", "saved per accepted turn, median [95% CI] (s)",
                    "saved per later turn, mean [95% CI] (s)", "same, pair-level CI", "turns slower than base",
                    "session wall saved"], rows)
    lines += [CI_NOTE, ""]
    few = min(v["scenarios"] for _, v in blocks)
    if few < MIN_CLUSTERS:  # a cluster bootstrap over a handful of scenarios understates the uncertainty
        lines += [f"**These CIs rest on {few} scenarios (fewer than {MIN_CLUSTERS}): read them as rough.** "
                  "Run more scenarios for a result.", ""]
    return lines


def _legacy_versus_table(blocks: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """A summary made before issue #24: its CIs resample pairs only, and the table says so."""
    rows = []
    for name, v in blocks:
        acc, later, slow = v["saved_per_accepted_turn_s"], v["saved_per_later_turn_s"], v["slower_turns"]
        rows.append([name, f(v["clusters"]), f"{f(acc['median'])} {ci(acc['ci95'])} (n={acc['n']})",
                     f"{f(later['mean'])} {ci(later['ci95'])} (n={later['n']})",
                     f"{slow['n']} ({pct(slow['share'])}), max {f(slow['max_s'])} s",
                     pct(v["session_wall_reduction"])])
    lines = _table(["paired comparison", "clusters", "saved per accepted turn, median [95% CI] (s)",
                    "saved per later turn, mean [95% CI] (s)", "turns slower than base", "session wall saved"],
                   rows)
    few = min(v["clusters"] for _, v in blocks)
    if few < MIN_CLUSTERS:
        lines[-1:-1] = [f"**These CIs rest on {few} session clusters (fewer than {MIN_CLUSTERS}): read them as "
                        "rough.** Run more reps or scenarios for a result.", ""]
    return lines


CI_NOTE = ("CIs: 95% percentile bootstrap resampling scenarios, then reps within each (the hierarchical CI); "
           "the pair-level CI resamples reps only and treats the reps of a scenario as independent, which "
           "they are not (it is narrower, shown for comparison with runs before issue #24).")


def fork_cost_line(s: dict[str, Any]) -> list[str]:
    """Mean cost of a fork that was used (hit) and of one thrown away (miss): misses must not be cheap."""
    fc = s.get("fork_cost")
    if not fc:
        return []
    h, m, mc = fc["hit"], fc["miss"], fc["miss_completed"]
    return [["fork cost per hit / per miss (ratio); misses that had finished",
             f"{usd(h['mean_usd'])} (n={h['n']}) / {usd(m['mean_usd'])} (n={m['n']}) ({pct(fc['miss_to_hit'])}); "
             f"{usd(mc['mean_usd'])} (n={mc['n']})"]]


def _misses(b: dict[str, Any]) -> str:
    m = b.get("miss_kinds") or {}
    return "—" if not m else " / ".join(str(m.get(k, 0)) for k in ("candidate", "later_turn", "unscripted"))


def render_markdown(s: dict[str, Any]) -> str:
    run = s["run"]
    lines = [f"# speculate bench — {s['run_id']}", "",
             f"Backend `{s['backend']}`, seed {s['seed']}, time scale {s['time_scale']:g}, "
             f"{s['reps']} rep(s), scenarios: {', '.join(s['scenarios'])}. "
             f"Sessions ran {s['concurrency']} at a time on {s['cpus']} CPU(s), arms paired and interleaved. "
             f"Run wall time {run['wall_s']:.0f} s; {run['sessions']} sessions finished"
             + (", **interrupted** (partial results)" if run["interrupted"] else "")
             + (f", {len(run['failures'])} failed" if run["failures"] else "") + ".", "",
             f"Primary condition: `{s['primary_condition']}`. All times are wall-clock seconds"
             + (f" (the simulator and the simulated user run at {s['time_scale']:g}× real time, tool commands at "
                "real speed: these are not user seconds, see docs/experiments.md, Design)."
                if s["time_scale"] != 1 else ", a user's seconds."), "",
             "## Headline", "", *headline_table(s)]

    lines += ["## Per scenario", ""]
    rows = []
    for name, b in s["per_scenario"].items():
        rows.append([name, f(b["arms"]["plain"]["turns"]), f(b["arms"]["plain"]["turn_latency_s"]["p50"]),
                     f(b["arms"]["speculative"]["turn_latency_s"]["p50"]), f(b["accepted"]),
                     pct(b["acceptance_rate"]), f(b["time_saved_s"]["median"]), ci(b["time_saved_s"]["ci95"]),
                     _later(b, "suggest"), _later(b, "plain"),
                     usd(b["arms"]["plain"]["cost_per_turn_usd"]), usd(b["arms"]["speculative"]["cost_per_turn_usd"])])
    lines += _table(["scenario", "turns/arm", "plain p50", "spec p50", "accepted", "acceptance", "saved p50",
                     "saved CI", "per later turn vs suggest [CI]", "vs plain [CI]", "plain $/turn", "spec $/turn"],
                    rows)

    lines += ["## Outcomes and boundaries", ""]
    rows = [[f"suggestion: {k}", str(v)] for k, v in s["suggestion_outcomes"].items()]
    rows += [[f"suppressed/filtered: {k}", str(v)] for k, v in s["suppressed_reasons"].items()]
    rows += [[f"speculation: {k}", str(v)] for k, v in s["speculation_outcomes"].items()]
    rows += [[f"boundary: {k}", str(v)] for k, v in s["boundaries"].items()]
    rows += [["accepted speculations finished by the time of acceptance", pct(s["finished_by_accept_share"])],
             ["accepted with Tab / by typing the same text",
              f"{s['accepted_by_input']['tab']} / {s['accepted_by_input']['typed']}"]]
    lines += _table(["outcome", "count"], rows)

    lines += ["## Tokens by kind", ""]
    rows = []
    for arm in s["arms"]:
        for part, tok in s["arms"][arm]["tokens"].items():
            if any(tok.values()):
                rows.append([arm, part, *(f(tok[k]) for k in ("input_tokens", "cache_creation_input_tokens",
                                                               "cache_read_input_tokens", "output_tokens"))])
    lines += _table(["arm", "requests", "input", "cache write", "cache read", "output"], rows)
    lines += [f"Wasted suggestion tokens: {s['wasted_suggestion_tokens']}; wasted cost "
              f"{usd(s['wasted_cost_usd'])}; total cost plain {usd(s['cost_usd']['plain'])}, speculative "
              f"{usd(s['cost_usd']['speculative'])}.", ""]

    lines += ["## Overheads (s)", ""]
    rows = [[k.replace("_", " "), f(v["n"]), f(v["p50"], digits=4), f(v["p90"], digits=4)]
            for k, v in s["overheads_s"].items()]
    lines += _table(["overhead", "n", "p50", "p90"], rows)
    be = s["break_even_think_s"]
    sweep = "—" if be["sweep"] is None else ("≤ " if be.get("at_most") else "") + f(be["sweep"])
    lines += [f"Break-even think time: model estimate {f(s['break_even_think_model_s'])} s "
              f"(suggestion + fork start + promotion); from the think sweep {sweep} s "
              f"{ci(be.get('ci95'))} (interpolated; 95% CI by resampling sessions per swept think time).", ""]

    if s.get("sensitivity"):
        lines += ["## Sensitivity", "", *sensitivity_table(s)]
    if len(s["conditions_detail"]) > 1:
        lines += ["## Sweep", ""]
        rows = []
        for b in s["conditions_detail"]:
            rows.append([f"`{b['label']}`", pct(b["acceptance_rate"]), pct(b["suggestion_coverage"]),
                         _later(b, "suggest"), _later(b, "plain"), f(b["arms"]["plain"]["turn_latency_s"]["p50"]),
                         f(b["arms"]["speculative"]["turn_latency_s"]["p50"]), pct(b["efficiency"]["pooled"]),
                         usd(b["arms"]["plain"]["cost_per_turn_usd"]), usd(b["arms"]["speculative"]["cost_per_turn_usd"]),
                         _misses(b)])
        lines += _table(["condition", "acceptance", "coverage", "saving per later turn vs suggest [CI]",
                         "vs plain [CI]", "plain p50", "spec p50", "efficiency", "plain $/turn", "spec $/turn",
                         "misses (candidate / later turn / unscripted)"], rows)
        lines += ["Forced conditions (`p=…`) set the share of suggestions that are the user's next prompt; a miss "
                  "is a scenario's wrong candidate, a later turn's prompt (both run real work in the fork), or, "
                  "where neither exists, an unscripted prompt the fork answers at once (a cheap miss).", ""]
        lines += ["![saving vs acceptance](saving_vs_acceptance.png)", ""]

    lines += ["## Integrity", "",
              f"- Leaks into a real tree outside acceptance: **{s['leaks']}** (canary hashes of every session's "
              "project before each submit and after close, and of the bundled workspaces before/after the run).",
              f"- Harm: the simulated user edited a file mid-think before {s['user_edits']['turns']} speculative-arm "
              f"turn(s) (probability {s.get('user_edit_prob', '—')}, an assumption); speculations discarded on "
              f"conflict: {s['user_edits']['conflicts']}; turns slower than their paired suggest/plain turn: "
              + ", ".join(f"vs {b} {v['slower_turns']['n']} (max {f(v['slower_turns']['max_s'])} s)"
                          for b, v in s.get("vs", {}).items()) + ".",
              f"- Pairs whose final trees differ between arms: {len(s['tree_divergence'])}"
              + (f" ({', '.join(s['tree_divergence'])})" if s["tree_divergence"] else "") + ".",
              "- Turn errors: " + ", ".join(f"{a} {v['errors']}" for a, v in s["arms"].items()) + "; "
              f"failed sessions: {len(run['failures'])}.",
              *(f"  - `{e['session']}` turn {e['turn'] + 1}: {e['error']}" for e in s.get("turn_errors", [])[:50]),
              "",
              "## Plots", "", "![latency CDF](latency_cdf.png)", "",
              "![time saved vs think time](time_saved_vs_think.png)", "", "![cost vs latency](cost_vs_latency.png)", ""]
    return "\n".join(lines)


def load_run(out: Path) -> Records:
    """A run's validated records (turns, sessions, events), from its directory."""
    return Records(load_records(out / "turns.jsonl", TurnRecord), load_records(out / "sessions.jsonl", SessionRecord),
                   load_events(out / "events.jsonl"))


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
