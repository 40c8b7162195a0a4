"""Run the corpus under both agents and report: ``python -m tests.permissions.differential [--json OUT]
[--category C] [--jobs N] [--keep DIR]``.

Prints the summary (calls, same, stricter, looser, by category), then every call that is not the same
with both decisions and Claude Code's text, and the configurations whose final trees differ. ``--json``
writes every record (configuration, call, category, both decisions and texts) and the tree differences.
Exit status 0 whatever the verdicts (the test decides what passes); 2 where Claude Code is missing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import claude_side, speculate_side
from .cases import Config
from .compare import Record, records, report, tree_differences
from .corpus import configurations


@dataclass
class Result:
    records: list[Record]
    trees: dict[str, list[tuple[str, str, str]]]
    notes: dict[str, list[str]]
    wall_s: float

    def report(self, intended: dict[str, str]) -> str:
        text = report(self.records, self.trees, self.notes, intended)
        return text + f"\n\n(ran in {self.wall_s:.0f} s)"

    def as_json(self) -> dict[str, object]:
        return {
            "records": [r.as_json() for r in self.records],
            "trees": {k: [list(d) for d in v] for k, v in self.trees.items()},
            "notes": self.notes,
            "wall_s": self.wall_s,
        }


def run(configs: list[Config], work: Path, binary: Path, jobs: int = 4, tree: Path | None = None) -> Result:
    """Every configuration under both agents in ``work``: Claude Code ``jobs`` configurations at a time,
    alongside speculate in ``jobs - 1`` child processes that take a share of the configurations each;
    speculate's package from ``tree`` (a checkout) where given."""
    t0 = time.perf_counter()
    # Longest first, and speculate's share balanced by calls: the run ends when the last long one does.
    longest = sorted(configs, key=lambda c: -len(c.calls))
    batches: list[list[Config]] = [[] for _ in range(max(1, jobs - 1))]
    for c in longest:
        min(batches, key=lambda b: sum(len(x.calls) for x in b)).append(c)
    with ThreadPoolExecutor(max_workers=jobs + len(batches)) as pool:
        sp_futures = [
            pool.submit(speculate_side.run_batch, [(c, work / c.name / "speculate") for c in b], tree)
            for b in batches
        ]
        with ThreadPoolExecutor(max_workers=jobs) as cc_pool:
            cc_runs = list(
                cc_pool.map(lambda c: claude_side.run(c, work / c.name / "claude", binary), longest)
            )
        cc_by_name = {c.name: r for c, r in zip(longest, cc_runs, strict=True)}
        sp_by_name = {
            c.name: r
            for b, f in zip(batches, sp_futures, strict=True)
            for c, r in zip(b, f.result(), strict=True)
        }
    recs: list[Record] = []
    trees: dict[str, list[tuple[str, str, str]]] = {}
    notes: dict[str, list[str]] = {}
    for cfg in configs:
        cc, sp = cc_by_name[cfg.name], sp_by_name[cfg.name]
        recs += records(cfg, cc, sp)
        trees[cfg.name] = tree_differences(cc, sp)
        notes[cfg.name] = [f"Claude Code: {n}" for n in cc.notes] + [f"speculate: {n}" for n in sp.notes]
    return Result(recs, trees, notes, time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    from speculate.sim.claude_code import ClaudeCode

    from .test_differential import INTENDED_STRICTER

    ap = argparse.ArgumentParser(prog="python -m tests.permissions.differential", description=__doc__)
    ap.add_argument("--json", type=Path, help="write every record here")
    ap.add_argument("--category", help="only this category's configurations")
    ap.add_argument("--config", help="only the configurations whose name contains this")
    ap.add_argument("--jobs", type=int, default=4, help="Claude Code runs at a time (default 4)")
    ap.add_argument("--keep", type=Path, help="run in this directory and keep it (default: a temp dir)")
    ap.add_argument(
        "--speculate-tree",
        type=Path,
        help="a checkout (or `git archive` of a commit) whose speculate package to measure (default: this one)",
    )
    args = ap.parse_args(argv)
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        print(binary, file=sys.stderr)
        return 2
    configs = [c for c in configurations(args.category) if args.config is None or args.config in c.name]
    work = args.keep or Path(tempfile.mkdtemp(prefix="permissions-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    try:
        tree = args.speculate_tree.resolve() if args.speculate_tree else None
        result = run(configs, work.resolve(), binary, args.jobs, tree)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(result.report(INTENDED_STRICTER))
    if args.json:
        args.json.write_text(json.dumps(result.as_json(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
