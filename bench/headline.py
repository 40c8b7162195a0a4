"""The README's headline, reproducible: the runs behind it are kept in ``bench/headline/`` (each run's
summary.json and the command that made it), and this module writes the README block from them.

- ``bench/headline/sweep/``: the acceptance sweep, the primary result (saving against acceptance rate);
- ``bench/headline/``: the default benchmark at real time (per-arm latency, paired savings, cost).

    python -m bench.headline RESULTS_DIR [COMMAND]          # keep a default run, rewrite README
    python -m bench.headline --sweep RESULTS_DIR [COMMAND]  # keep a sweep run, rewrite README
    python -m bench.headline                                # rewrite README's block from the kept runs

tests/bench/test_headline.py checks that README's block equals what the kept summaries give.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from bench.report import acceptance_table, headline_table, pct

ROOT = Path(__file__).resolve().parent.parent
HEADLINE_DIR = ROOT / "bench" / "headline"
SWEEP_DIR = HEADLINE_DIR / "sweep"
README = ROOT / "README.md"
BEGIN, END = "<!-- headline -->", "<!-- /headline -->"


def _run_line(s: dict[str, Any], command: str, where: str) -> str:
    return (f"Run `{s['run_id']}`: {len(s['scenarios'])} scenarios × {s['reps']} reps × "
            f"{len(s.get('conditions') or [1])} condition(s), arms {', '.join(s.get('arms', []))} paired and "
            f"interleaved, time scale {s['time_scale']:g}, seed {s['seed']}, user-edit probability "
            f"{s.get('user_edit_prob', 0)} (an assumption); {s['concurrency']} sessions at a time on {s['cpus']} "
            f"CPUs, {s['run']['wall_s'] / 60:.1f} min. Command: `{command}`; kept in `{where}`.")


def readme_block(s: dict[str, Any], command: str, sweep: tuple[dict[str, Any], str] | None = None) -> str:
    lines = [
        "**Acceptance is set by the scenarios, not measured.** The simulated user takes a suggestion exactly "
        "when it is the prompt the scenario scripts next, so how often that happens is the scenario authors' "
        "choice (their candidates' weights). The primary result is therefore saving *against* acceptance: "
        "the sweep forces the share of suggestions that are the user's next prompt (a miss is a wrong "
        "suggestion whose fork does real work and is thrown away), and the bundled scenarios' own rate is the "
        "`natural` row. Every turn stays on its script and meets its tool-result checks. A turn's time "
        "includes entering the prompt (typing, or Tab); `suggest` is ghost text and Tab with no fork, so "
        "*speculative vs suggest* is what speculation itself buys.",
        "",
    ]
    if sweep is not None:
        sw, sw_cmd = sweep
        lines += ["### Saving against acceptance rate (primary result)", "",
                  _run_line(sw, sw_cmd, "bench/headline/sweep/summary.json"), "", *acceptance_table(sw),
                  "![saving vs acceptance](bench/headline/sweep/saving_vs_acceptance.png)", ""]
    lines += ["### The default benchmark at the scenarios' own rate", "",
              _run_line(s, command, "bench/headline/summary.json") + f" Acceptance {pct(s.get('acceptance_rate'))}"
              f", coverage {pct(s.get('suggestion_coverage'))}.", "", *headline_table(s)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _load(d: Path) -> tuple[dict[str, Any], str]:
    s = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    return s, (d / "command.txt").read_text(encoding="utf-8").strip()


def load() -> tuple[dict[str, Any], str, tuple[dict[str, Any], str] | None]:
    s, command = _load(HEADLINE_DIR)
    return s, command, (_load(SWEEP_DIR) if (SWEEP_DIR / "summary.json").exists() else None)


def current_block(readme: str) -> str:
    start, end = readme.index(BEGIN) + len(BEGIN) + 1, readme.index(END)
    return readme[start:end]


def write_readme() -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
    README.write_text(text[:start] + readme_block(*load()) + text[end:], encoding="utf-8")


def keep(src: Path, dest: Path, command: str | None) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("summary.json", "report.md", "saving_vs_acceptance.png"):
        if (src / name).exists():
            shutil.copy(src / name, dest / name)
    if command:
        (dest / "command.txt").write_text(command + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--sweep"]:
        keep(Path(argv[1]), SWEEP_DIR, argv[2] if len(argv) > 2 else None)
    elif argv:
        keep(Path(argv[0]), HEADLINE_DIR, argv[1] if len(argv) > 1 else None)
    write_readme()
    print(f"README.md headline rewritten from {HEADLINE_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
