"""Both agents' runs of a configuration side by side: per call ``same``, ``stricter`` (speculate refuses
more: deny > ask > allow), ``looser`` or ``incomparable`` (one side's tool refused the input before any
permission decision, or a call never ran); per configuration the paths whose final state differs; and
the report (a summary by category, then every call that is not the same)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from .cases import Call, Config
from .claude_side import SideRun

RANK = {"allow": 0, "ask": 1, "deny": 2}
VERDICTS = ("same", "stricter", "looser", "incomparable")


@dataclass
class Record:
    key: str
    config: str
    category: str
    mode: str | None
    tool: str
    call: str  # the command or the tool and path
    claude: str  # allow | ask | deny | error | missing
    claude_text: str
    speculate: str
    speculate_text: str
    verdict: str
    served: str = ""  # where an agent got a call other than the scripted one

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def verdict(claude: str, speculate: str) -> str:
    if claude == speculate:
        return "same"
    if claude not in RANK or speculate not in RANK:
        return "incomparable"
    return "stricter" if RANK[speculate] > RANK[claude] else "looser"


def records(cfg: Config, cc: SideRun, sp: SideRun) -> list[Record]:
    out = []
    for call, a, b in zip(cfg.calls, cc.outcomes, sp.outcomes, strict=True):
        served = "; ".join(
            f"{who} got {o.served}" for who, o in (("claude", a), ("speculate", b)) if o.served
        )
        out.append(
            Record(
                cfg.key(call),
                cfg.name,
                call.category,
                cfg.mode,
                call.tool,
                _call_text(call),
                a.decision,
                a.text,
                b.decision,
                b.text,
                verdict(a.decision, b.decision),
                served,
            )
        )
    return out


def _call_text(call: Call) -> str:
    return call.text.replace("\n", "\\n")


def tree_differences(cc: SideRun, sp: SideRun) -> list[tuple[str, str, str]]:
    """(path, what Claude Code's run did to it, what speculate's did) where the two differ."""
    paths = sorted(cc.changes.keys() | sp.changes.keys())
    return [
        (p, cc.changes.get(p, "unchanged"), sp.changes.get(p, "unchanged"))
        for p in paths
        if cc.changes.get(p) != sp.changes.get(p)
    ]


def summary(recs: list[Record], intended: dict[str, str]) -> str:
    by: dict[str, Counter[str]] = {}
    for r in recs:
        by.setdefault(r.category, Counter())[r.verdict] += 1
        if r.verdict == "stricter" and r.key in intended:
            by[r.category]["intended"] += 1
    total: Counter[str] = sum(by.values(), Counter())
    head = f"{'category':20} {'calls':>6} {'same':>6} {'stricter':>9} {'(listed)':>9} {'looser':>7} {'incomp.':>8}"
    lines = [head, "-" * len(head)]
    for cat, n in [*by.items(), ("total", total)]:
        lines.append(
            f"{cat:20} {sum(n[v] for v in VERDICTS):6} {n['same']:6} {n['stricter']:9} {n['intended']:9} "
            f"{n['looser']:7} {n['incomparable']:8}"
        )
    return "\n".join(lines)


def _detail(r: Record, intended: dict[str, str]) -> list[str]:
    lines = [f"  {r.key}  [{r.category}, mode {r.mode}]", f"      call:        {r.call}"]
    lines.append(f"      Claude Code: {r.claude}: {_one_line(r.claude_text)}")
    lines.append(f"      speculate:   {r.speculate}: {_one_line(r.speculate_text)}")
    if r.served:
        lines.append(f"      served:      {r.served}")
    if r.key in intended:
        lines.append(f"      listed:      {intended[r.key]}")
    return lines


def _one_line(text: str, width: int = 240) -> str:
    flat = " | ".join(x for x in text.splitlines() if x.strip())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def report(
    recs: list[Record],
    trees: dict[str, list[tuple[str, str, str]]],
    notes: dict[str, list[str]],
    intended: dict[str, str],
) -> str:
    configs = len({r.config for r in recs})
    out = [f"Permission corpus: {len(recs)} calls in {configs} configurations, Claude Code vs speculate", ""]
    out += [summary(recs, intended), ""]
    differing = {k: v for k, v in trees.items() if v}
    out.append(f"final trees: {configs - len(differing)} of {configs} configurations the same")
    for title, which in (
        ("LOOSER (speculate allows or asks where Claude Code refuses more)", "looser"),
        ("STRICTER", "stricter"),
        ("INCOMPARABLE (a tool error or a missing result on one side)", "incomparable"),
    ):
        picked = [r for r in recs if r.verdict == which]
        if not picked:
            continue
        out += ["", f"{title}: {len(picked)}"]
        for r in picked:
            out += _detail(r, intended)
    if differing:
        out += ["", f"TREE DIFFERENCES: {len(differing)} configurations"]
        for name, diffs in differing.items():
            out.append(f"  {name}")
            out += [f"      {p}: Claude Code {a!r}; speculate {b!r}" for p, a, b in diffs]
    noted = {k: v for k, v in notes.items() if v}
    if noted:
        out += ["", "NOTES (a run that did not go as scripted)"]
        out += [f"  {name}: {n}" for name, ns in noted.items() for n in ns]
    return "\n".join(out)
