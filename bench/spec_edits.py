"""The default-mode edit conditions of a run side by side (#37 item 2): per condition of a run made with
``speculate bench --permission-mode default --spec-edits stop,ask``, the saving per accepted turn and per
later turn against plain and suggest (paired, hierarchical CIs, as the report's), acceptance, the
speculations' boundaries and their approvals.

    python -m bench.spec_edits RUN_DIR        # a markdown table on stdout
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench.figures import acceptance, savings, versus
from bench.pairs import Records
from bench.report import load_run


def by_condition(records: Records, *, seed: int = 0) -> list[dict[str, Any]]:
    """One row per condition of the run, in its order."""
    rows = []
    for cond in sorted({s.cond for s in records.sessions}):
        r = records.only(s for s in records.sessions if s.cond == cond)
        specs = r.speculations()
        acc = acceptance(r)
        rows.append(
            {
                "condition": next(t.condition for t in r.turns),
                "answer": savings(r, seed=seed),
                "vs_plain": versus(r, "plain", seed=seed),
                "vs_suggest": versus(r, "suggest", seed=seed),
                "accepted": acc["accepted"],
                "acceptance_rate": acc["acceptance_rate"],
                "boundaries": dict(Counter(e.boundary for e in specs if e.boundary)),
                "approved": sum(e.approval in ("approved", "always") for e in specs),
                "declined": sum(e.outcome == "declined" for e in specs),
            }
        )
    return rows


def _ci(v: dict[str, Any] | None, key: str) -> str:
    est = (v or {}).get(key) or {}
    stat = "median" if "median" in est else "mean"
    if est.get(stat) is None:
        return "—"
    lo, hi = est.get("ci95") or (None, None)
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{est[stat]:.2f}{ci} (n={est.get('n', '?')})"


def table(rows: list[dict[str, Any]]) -> str:
    head = [
        "| condition | submit-to-answer saved per accepted turn vs plain, median [95% CI] (s) | saved per "
        "accepted turn (input included) vs plain | vs suggest | saved per later turn vs plain, mean [95% CI] "
        "(s) | accepted (rate) | boundaries | approvals asked at acceptance |",
        "|---|---|---|---|---|---|---|---|",
    ]
    body = [
        f"| `{r['condition']}` | {_ci(r['answer'], 'time_saved_s')} | "
        f"{_ci(r['vs_plain'], 'saved_per_accepted_turn_s')} | "
        f"{_ci(r['vs_suggest'], 'saved_per_accepted_turn_s')} | {_ci(r['vs_plain'], 'saved_per_later_turn_s')} | "
        f"{r['accepted']} ({(r['acceptance_rate'] or 0):.0%}) | "
        + ", ".join(f"{k} {n}" for k, n in sorted(r["boundaries"].items()))
        + f" | {r['approved']} yes, {r['declined']} no |"
        for r in rows
    ]
    return "\n".join(head + body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.spec_edits", description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a run directory (turns.jsonl, sessions.jsonl, events.jsonl)")
    a = ap.parse_args(argv)
    if not (a.run / "turns.jsonl").is_file():
        print(f"bench.spec_edits: {a.run}: no turns.jsonl (not a run directory)", file=sys.stderr)
        return 2
    print(table(by_condition(load_run(a.run))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
