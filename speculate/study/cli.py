"""``speculate study report DIR…``: the options, and the report as text (or JSON with ``--json``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from speculate.study.records import StudyFileError


def configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Pool the study directories of one or many people (written by `speculate repl --study DIR`) "
        "and report what the benchmark reports: the saving per turn taken as-is and per later turn, "
        "acceptance as an outcome, cost and harm, with CIs clustered by person and session; plus "
        "acceptance by the suggestion's length and first word (docs/study.md)."
    )
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="study directories")
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the report as JSON ('-': stdout only)",
    )
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    p.add_argument(
        "--resamples", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)"
    )
    p.set_defaults(run=run)


def run(a: argparse.Namespace) -> int:
    from speculate.study.report import build_report, load

    if a.resamples < 100:
        print(f"speculate study report: --resamples {a.resamples}: use at least 100", file=sys.stderr)
        return 2
    try:
        report = build_report(load(a.dirs), seed=a.seed, resamples=a.resamples)
    except (StudyFileError, ValueError, OSError) as e:
        print(f"speculate study report: {e}", file=sys.stderr)
        return 2
    if a.json is not None and str(a.json) == "-":
        print(json.dumps(report, indent=1))
        return 0
    print(format_report(report))
    if a.json is not None:
        a.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


def _s(x: float | None, unit: str = "s", sign: bool = True) -> str:
    if x is None:
        return "—"
    if unit == "$":
        return f"{'+' if sign and x >= 0 else ''}${x:.4f}" if x >= 0 or not sign else f"-${-x:.4f}"
    if unit == "%":
        return f"{'+' if sign and x > 0 else ''}{100 * x:.0f}%"
    return f"{'+' if sign and x > 0 else ''}{x:.2f} {unit}"


def _ci(ci: list[float] | None, unit: str = "s") -> str:
    if ci is None:
        return "[no CI]"
    return f"[{_s(ci[0], unit, False)}, {_s(ci[1], unit, False)}]"


def _est(e: dict[str, Any], center: str, unit: str = "s") -> str:
    sides = ", ".join(f"{a} {_s(e[center][a], unit, False)} (n {e['n'][a]})" for a in e["n"])
    return f"{_s(e['difference'], unit)} {_ci(e['ci95'], unit)}   ({center}s: {sides})"


def _rate(r: dict[str, Any]) -> str:
    return "—" if r["rate"] is None else f"{100 * r['rate']:.0f}% {_ci(r['ci95'], '%')}"


def format_report(r: dict[str, Any]) -> str:
    out = [
        f"speculate study report: {r['users']} people, {r['sessions']} sessions, {r['turns']} turns "
        f"({r['eligible_turns']} eligible, {r['usable_turns']} usable: eligible and answered); eligible turns "
        "by arm: " + ", ".join(f"{a} {n}" for a, n in r["turns_by_arm"].items()),
        "models: "
        + ", ".join(f"{m} ×{n}" for m, n in r["models"].items())
        + "; front ends: "
        + ", ".join(f"{m} ×{n}" for m, n in r["frontends"].items()),
    ]
    if r["simulated"]:
        out.append(
            "SIMULATED: every session ran on the simulator or with a program as the user. These figures "
            "check the pipeline; real figures need real people and a real model."
        )
    if r["time_scales"] != [1.0]:
        out.append(
            "time scale " + ", ".join(f"{x:g}" for x in r["time_scales"]) + ": seconds below are wall "
            "seconds of a simulator run that much faster than real time"
        )
    out.append(
        f"CIs (95%): {r['ci_method']}; {r['resamples']} resamples, seed {r['seed']}. [no CI]: fewer than "
        "two sessions in all, or too few of them holding both sides of a contrast."
    )
    out += format_balance(r)  # before any saving (issue #36)
    for base, v in r["vs"].items():
        what = (
            "what the fork buys; both arms show the same ghost text"
            if base == "suggest"
            else "no ghost text in plain: what the person does differs too"
        )
        out += ["", f"speculative vs {base} ({what}); a saving is {base} minus speculative"]
        out += _versus(v)
    if "suggest_vs_plain" in r:
        out += ["", "suggest vs plain (what the ghost text alone buys; behaviour differs)"]
        out += _versus(r["suggest_vs_plain"])
    if r["speculation_used_share"] is not None:
        out.append(
            f"  the speculation answered {100 * r['speculation_used_share']:.0f}% of the speculative arm's "
            "turns taken as-is (the rest: no fork, a conflict, declined, ...)"
        )
    acc = r["acceptance"]
    out += [
        "",
        "acceptance of the model's suggestions, an outcome (the arm is hidden until the prompt is sent)",
        f"  {'arm':<12} {'shown':>5}  {'taken':<22} {'edited':<22} ignored",
    ]
    for a, v in acc.items():
        if a == "taken_difference":
            continue
        out.append(
            f"  {a:<12} {v['taken']['n']:>5}  {_rate(v['taken']):<22} {_rate(v['edited']):<22} "
            f"{_rate(v['ignored'])}"
        )
    if "taken_difference" in acc:
        d = acc["taken_difference"]
        out.append(f"  taken, speculative minus suggest: {_s(d['difference'], '%')} {_ci(d['ci95'], '%')}")
    c = r["cost"]
    out += ["", "cost per eligible turn (main turn + the suggestion and fork before it)"]
    out += [
        f"  {a:<12} {_s(v['per_turn_usd'], '$', False)} (suggestion and fork {_s(v['engine_per_turn_usd'], '$', False)}; "
        f"{v['turns']} turns)"
        for a, v in c.items()
        if isinstance(v, dict)
    ]
    out.append(f"  never-decided last cycles of sessions: {_s(c['trailing_engine_usd'], '$', False)} in all")
    h = r["harm"]
    out += [
        "",
        "harm",
        "  answer latency on turns not taken, speculative minus suggest (positive: slower): "
        + _est(h["slower_when_not_taken_s"], "mean"),
        "  failed or cancelled turns: "
        + ", ".join(f"{a} {v['failed']}/{v['turns']}" for a, v in h["failed_or_cancelled"].items()),
        "  speculation outcomes: "
        + _counts(h["speculation_outcomes"])
        + "; boundaries: "
        + _counts(h["boundaries"]),
        "  questions put to the person per turn (their answering time is part of the answer's latency): "
        + ", ".join(
            f"{a} {_n(v['per_turn'])} ({_n(v['seconds_per_turn'])} s)" for a, v in h["questions"].items()
        ),
        f"  taken as-is but the speculation not used: {h['taken_but_not_used']['turns']}"
        + (f" ({_counts(h['taken_but_not_used']['outcomes'])})" if h["taken_but_not_used"]["turns"] else ""),
    ]
    out += [
        "",
        "times by arm, median (n): think and typing should not differ (the arm is hidden until sent)",
        f"  {'arm':<12} {'think':<14} {'typing':<14} {'first token':<14} answer",
    ]
    for a, v in r["timings"].items():
        out.append(
            f"  {a:<12} "
            + " ".join(f"{_med(v[k]):<14}" for k in ("think_s", "typing_s", "ttft_s"))
            + _med(v["latency_s"])
        )
    for title, key in (("by suggestion length (words)", "by_length"), ("by first word", "by_first_word")):
        out += ["", f"acceptance {title}, ghost-text arms pooled: taken as-is [CI], edited"]
        out += [
            f"  {k:<12} n {v['taken']['n']:>4}  {_rate(v['taken']):<24} edited {100 * v['edited_share']:.0f}%"
            for k, v in r[key].items()
        ]
    return "\n".join(out)


def _versus(v: dict[str, Any]) -> list[str]:
    rows = []
    if "saved_per_accepted_turn_s" in v:
        rows += [
            "  per turn taken as-is, wait (typing + answer): "
            + _est(v["saved_per_accepted_turn_s"], "median"),
            "  per turn taken as-is, answer only:            "
            + _est(v["saved_per_accepted_turn_answer_s"], "median"),
        ]
    rows += [
        "  per later turn, wait (typing + answer):       " + _est(v["saved_per_later_turn_s"], "mean"),
        "  per later turn, answer only:                  " + _est(v["saved_per_later_turn_answer_s"], "mean"),
        "  extra cost per turn:                          " + _est(v["extra_cost_per_turn_usd"], "mean", "$"),
        f"  dollars per second saved: {_s(v['cost_per_second_saved_usd'], '$', False)}",
    ]
    return rows


def _n(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _med(s: dict[str, Any]) -> str:
    return "—" if not s["n"] else f"{s['p50']:.2f}s ({s['n']})"


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in d.items()) or "none"


def format_balance(r: dict[str, Any]) -> list[str]:
    """The balance check's lines, which the printed report shows before any saving."""
    b = r.get("balance") or {}
    out = [
        "",
        "balance check (before any saving): think from when the prompt opened to the first key, and typing",
    ]
    verdict = {True: "PASSES", False: "FAILS", None: "cannot tell (no CI)"}[b.get("passes")]
    out.append(f"  {verdict}: the arms should not differ in what happens before the prompt is sent")
    for k, name in (("think_s", "think"), ("typing_s", "typing")):
        if k in b:
            e = b[k]
            ci = "[no CI]" if e["ci95"] is None else f"[{e['ci95'][0]:+.2f}, {e['ci95'][1]:+.2f}]"
            d = "—" if e["difference"] is None else f"{e['difference']:+.2f} s"
            sides = ", ".join(
                f"{a} {'—' if e['mean'][a] is None else format(e['mean'][a], '.2f')} s (n {e['n'][a]})"
                for a in e["n"]
            )
            out.append(f"  {name}, suggest minus speculative: {d} {ci}   (means: {sides})")
    pp = b.get("per_person") or {}
    if pp:
        gap = max(v["gap"] for v in pp.values())
        out.append(
            f"  eligible turns by arm per person: largest gap between two arms {gap} ({len(pp)} people)"
        )
    return out
