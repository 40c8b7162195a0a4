"""The README's headline, reproducible: the runs behind it are kept in ``bench/headline/`` (each run's
summary.json, its report, and its raw records compressed), and this module writes the README block from them.

- ``bench/headline/sweep/``: the acceptance sweep, the primary result (saving against acceptance rate);
- ``bench/headline/``: the default benchmark at real time (per-arm latency, paired savings, cost);
- ``bench/headline/sensitivity/``: one condition per assumption varied (``speculate bench --sensitivity``).

    python -m bench.headline [--force] RESULTS_DIR                # keep a default run, rewrite README
    python -m bench.headline [--force] --sweep RESULTS_DIR        # keep a sweep run, rewrite README
    python -m bench.headline [--force] --sensitivity RESULTS_DIR  # keep a sensitivity run, rewrite README
    python -m bench.headline                                      # rewrite README's block from the kept runs

A run is kept only if its provenance (bench/provenance.py) names a commit of this repository's history and
a clean tree, and it finished without turn errors, failed sessions, leaks or an interruption; ``--force``
keeps it anyway and the README block says so and why. tests/bench/test_headline.py checks that README's
block equals what the kept summaries give.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench.provenance import git
from bench.tables import acceptance_table, headline_table, pct, sensitivity_table
from speculate.errors import SpeculateError

ROOT = Path(__file__).resolve().parent.parent
HEADLINE_DIR = ROOT / "bench" / "headline"
SWEEP_DIR = HEADLINE_DIR / "sweep"
SENSITIVITY_DIR = HEADLINE_DIR / "sensitivity"
README = ROOT / "README.md"
BEGIN, END = "<!-- headline -->", "<!-- /headline -->"
RAW = ("turns.jsonl", "sessions.jsonl", "events.jsonl", "failures.jsonl")
KEPT = ("summary.json", "report.md", "saving_vs_acceptance.png")


class Refused(SpeculateError):
    """The run cannot be kept as a headline: the reasons, one per line."""


def problems(s: dict[str, Any], *, repo: Path = ROOT) -> list[str]:
    """Why a run's summary cannot stand behind the README ([] if it can)."""
    out: list[str] = []
    run = s.get("run") or {}
    if s.get("turn_errors"):
        out.append(f"{len(s['turn_errors'])} turn error(s) (model errors or unmet tool-result expectations)")
    if run.get("failures"):
        out.append(f"{len(run['failures'])} failed session(s)")
    if run.get("interrupted"):
        out.append("the run was interrupted")
    if not run.get("sessions"):
        out.append("no session finished")
    if s.get("leaks"):
        out.append(f"{s['leaks']} leak(s) into a real tree")
    prov = s.get("provenance")
    if not prov:
        return [*out, "no provenance (commit, tree state, versions): the run predates issue #24"]
    commit = prov.get("commit")
    if prov.get("dirty") is not False:
        paths = ", ".join(prov.get("dirty_paths") or []) or "unknown"
        out.append(f"made from a dirty tree ({paths})" if prov.get("dirty") else "tree state unknown")
    if not commit:
        out.append("no commit recorded")
    elif git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo) is None:
        out.append(f"commit {commit[:12]} is not in this repository")
    elif git("merge-base", "--is-ancestor", commit, "HEAD", cwd=repo) is None:
        out.append(f"commit {commit[:12]} is not an ancestor of HEAD")
    return out


def _command(s: dict[str, Any], kept: dict[str, Any]) -> str:
    prov = s.get("provenance") or {}
    return f"{prov.get('command')}   # at commit {str(prov.get('commit'))[:12]}"


def _provenance_line(s: dict[str, Any], kept: dict[str, Any]) -> str:
    prov = s.get("provenance")
    if not prov:
        return ""
    v, m = prov.get("versions") or {}, prov.get("machine") or {}
    load = m.get("load_at_start"), m.get("load_at_end")
    text = (
        f" Python {v.get('python')}, speculate {v.get('speculate')}, anthropic {v.get('anthropic')}, kernel "
        f"{v.get('kernel')}; load average {load[0][0] if load[0] else '?'} at start, "
        f"{load[1][0] if load[1] else '?'} at end. Raw records: `turns.jsonl.gz`, `events.jsonl.gz`, "
        f"`sessions.jsonl.gz` beside it."
    )
    if kept.get("forced"):
        text += " **Kept with `--force` despite: " + "; ".join(kept["forced"]) + ".**"
    return text


def _run_line(s: dict[str, Any], command: str, where: str, kept: dict[str, Any] | None = None) -> str:
    return (
        f"Run `{s['run_id']}`: {len(s['scenarios'])} scenarios × {s['reps']} reps × "
        f"{len(s.get('conditions') or [1])} condition(s), arms {', '.join(s.get('arms', []))} paired and "
        f"interleaved, time scale {s['time_scale']:g}, seed {s['seed']}, user-edit probability "
        f"{s.get('user_edit_prob', 0)} (an assumption), {_rule(s)}; {s['concurrency']} sessions at a time on {s['cpus']} "
        f"CPUs, {s['run']['wall_s'] / 60:.1f} min. Command: `{command}`; kept in `{where}`."
        + _provenance_line(s, kept or {})
    )


RULES = {
    "exact": "the suggestion is the intended prompt byte for byte",
    "normalized": "equal to the intended prompt but for case, whitespace and trailing punctuation",
    "outcome": "its fork would give the same tree and answer as the intended prompt's turn, read from the "
    "simulator's scripts",
}


def _rule(s: dict[str, Any]) -> str:
    """The simulated user's decision rule; a run made before the option (issue #36) used ``exact``."""
    rule = s.get("accept_rule") or "exact"
    return f"decision rule `{rule}` ({RULES.get(rule, '?')})" + (
        "" if "accept_rule" in s else ", before the option"
    )


Kept = tuple[dict[str, Any], str, dict[str, Any]]


def readme_block(
    s: dict[str, Any],
    command: str,
    sweep: Kept | None = None,
    kept: dict[str, Any] | None = None,
    sensitivity: Kept | None = None,
) -> str:
    lines = [
        "**Acceptance is set by the scenarios, not measured.** The simulated user takes a suggestion when "
        "their decision rule says it is the prompt the scenario scripts next (each run below names its rule: "
        "`speculate bench --accept-rule exact|normalized|outcome`), so how often that happens is the scenario "
        "authors' choice (their candidates' weights). The primary result is therefore saving *against* acceptance: "
        "the sweep forces the share of suggestions that are the user's next prompt (a miss is a wrong "
        "suggestion whose fork does real work and is thrown away), and the bundled scenarios' own rate is the "
        "`natural` row. Every turn stays on its script and meets its tool-result checks. A turn's time "
        "includes entering the prompt (typing, or Tab); `suggest` is ghost text and Tab with no fork, so "
        "*speculative vs suggest* is what speculation itself buys.",
        "",
    ]
    if sweep is not None:
        sw, sw_cmd, sw_kept = sweep
        lines += [
            "### Saving against acceptance rate (primary result)",
            "",
            _run_line(sw, sw_cmd, "bench/headline/sweep/summary.json", sw_kept),
            "",
            *acceptance_table(sw),
            "![saving vs acceptance](bench/headline/sweep/saving_vs_acceptance.png)",
            "",
        ]
    lines += [
        "### The default benchmark at the scenarios' own rate",
        "",
        _run_line(s, command, "bench/headline/summary.json", kept)
        + f" Acceptance {pct(s.get('acceptance_rate'))}"
        f", coverage {pct(s.get('suggestion_coverage'))}.",
        "",
        *headline_table(s),
    ]
    if sensitivity is not None:
        se, se_cmd, se_kept = sensitivity
        lines += [
            "### Sensitivity to the assumptions",
            "",
            _run_line(se, se_cmd, "bench/headline/sensitivity/summary.json", se_kept),
            "",
            *sensitivity_table(se),
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def _load(d: Path) -> Kept:
    s = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    kept_path = d / "kept.json"
    kept = json.loads(kept_path.read_text(encoding="utf-8")) if kept_path.exists() else {}
    return s, (d / "command.txt").read_text(encoding="utf-8").strip(), kept


def load() -> tuple[dict[str, Any], str, Kept | None, dict[str, Any], Kept | None]:
    """The README block's arguments: the default run (summary, command, kept), the sweep, the sensitivity."""
    s, command, kept = _load(HEADLINE_DIR)
    sweep = _load(SWEEP_DIR) if (SWEEP_DIR / "summary.json").exists() else None
    sens = _load(SENSITIVITY_DIR) if (SENSITIVITY_DIR / "summary.json").exists() else None
    return s, command, sweep, kept, sens


def current_block(readme: str) -> str:
    start, end = readme.index(BEGIN) + len(BEGIN) + 1, readme.index(END)
    return readme[start:end]


def write_readme() -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
    README.write_text(text[:start] + readme_block(*load()) + text[end:], encoding="utf-8")


def keep(src: Path, dest: Path, *, force: bool = False, repo: Path = ROOT) -> list[str]:
    """Copy a finished run into ``dest`` (summary, report, plot, raw records gzipped, the command); raises
    :class:`Refused` unless it passes :func:`problems` or ``force``. Returns the problems overridden."""
    try:
        s = json.loads((src / "summary.json").read_text(encoding="utf-8"))
    except OSError as e:
        raise Refused(f"{src}: cannot read summary.json: {e.strerror or e}") from None
    found = problems(s, repo=repo)
    if found and not force:
        raise Refused("\n".join(f"{src}: {p}" for p in found))
    if dest.exists():  # a kept run is replaced as a whole: nothing of the previous one stays beside it
        for p in dest.iterdir():
            if p.is_file():
                p.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        if (src / name).exists():
            shutil.copy(src / name, dest / name)
    for name in RAW:
        if (src / name).exists():
            with (src / name).open("rb") as f, gzip.open(dest / f"{name}.gz", "wb", compresslevel=9) as g:
                shutil.copyfileobj(f, g)
    kept = {"from": str(src), "kept_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "forced": found}
    (dest / "kept.json").write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
    (dest / "command.txt").write_text(_command(s, kept) + "\n", encoding="utf-8")
    return found


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.headline",
        description="Keep a finished run as the "
        "README's headline (or rewrite the README block from the kept runs).",
    )
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--sweep", action="store_true", help="the run is the acceptance sweep")
    which.add_argument(
        "--sensitivity", action="store_true", help="the run is `speculate bench --sensitivity`"
    )
    ap.add_argument(
        "--force",
        action="store_true",
        help="keep it despite turn errors, a dirty tree or a "
        "commit outside HEAD's history (the README block says so)",
    )
    ap.add_argument("results", nargs="?", type=Path, help="the run's results directory")
    a = ap.parse_args(argv)
    if a.results is not None:
        dest = SWEEP_DIR if a.sweep else SENSITIVITY_DIR if a.sensitivity else HEADLINE_DIR
        try:
            forced = keep(a.results, dest, force=a.force)
        except Refused as e:
            print(
                f"bench.headline: refused (--force keeps it anyway, and says so in the README):\n{e}",
                file=sys.stderr,
            )
            return 1
        for p in forced:
            print(f"bench.headline: kept with --force despite: {p}", file=sys.stderr)
    elif a.sweep or a.sensitivity or a.force:
        ap.error("--sweep, --sensitivity and --force need a results directory")
    write_readme()
    print(f"README.md headline rewritten from {HEADLINE_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
