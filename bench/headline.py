"""The README's headline, reproducible: the run behind it is kept in ``bench/headline/`` (summary.json and
the command that made it), and this module writes the README block from that summary.

    python -m bench.headline RESULTS_DIR   # keep RESULTS_DIR/summary.json as the headline, rewrite README
    python -m bench.headline               # rewrite README's block from the kept summary

tests/bench/test_headline.py checks that README's block equals what the kept summary gives.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from bench.report import headline_table, pct

ROOT = Path(__file__).resolve().parent.parent
HEADLINE_DIR = ROOT / "bench" / "headline"
README = ROOT / "README.md"
BEGIN, END = "<!-- headline -->", "<!-- /headline -->"


def readme_block(s: dict[str, Any], command: str) -> str:
    conds = s.get("primary_condition") or ""
    lines = [
        f"Run `{s['run_id']}`: {len(s['scenarios'])} scenarios × {s['reps']} reps, arms "
        f"{', '.join(s.get('arms', ['plain', 'speculative']))} paired and interleaved, condition `{conds}`, "
        f"time scale {s['time_scale']:g}, seed {s['seed']}, user-edit probability "
        f"{s.get('user_edit_prob', 0)} (an assumption); {s['concurrency']} sessions at a time on {s['cpus']} "
        f"CPUs, {s['run']['wall_s'] / 60:.1f} min. Command: `{command}`; the summary is kept in "
        "`bench/headline/summary.json` and `python -m bench.headline` rewrites this block from it.",
        "",
        f"**Acceptance is set by the scenarios, not measured:** the simulated user accepts exactly when the "
        f"suggestion the scenario offers equals the prompt it scripts next, so the acceptance rate here "
        f"({pct(s.get('acceptance_rate'))}, coverage {pct(s.get('suggestion_coverage'))}) is a property of "
        "the bundled scenarios. Read the savings per accepted turn and per later turn as conditional on it; "
        "`--accept-prob` sweeps it. In the paired comparisons a turn's time includes entering the prompt "
        "(typing or Tab); the speculation table below is submit-to-answer latency only.",
        "",
        *headline_table(s),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def load() -> tuple[dict[str, Any], str]:
    s = json.loads((HEADLINE_DIR / "summary.json").read_text(encoding="utf-8"))
    command = (HEADLINE_DIR / "command.txt").read_text(encoding="utf-8").strip()
    return s, command


def current_block(readme: str) -> str:
    start, end = readme.index(BEGIN) + len(BEGIN) + 1, readme.index(END)
    return readme[start:end]


def write_readme() -> None:
    s, command = load()
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
    README.write_text(text[:start] + readme_block(s, command) + text[end:], encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv:
        src = Path(argv[0])
        HEADLINE_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / "summary.json", HEADLINE_DIR / "summary.json")
        if len(argv) > 1:
            (HEADLINE_DIR / "command.txt").write_text(argv[1] + "\n", encoding="utf-8")
    write_readme()
    print(f"README.md headline rewritten from {HEADLINE_DIR / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
