"""What acceptance parity and the overlay checks cost a fork, per sandboxed command and per acceptance.

Run: ``.venv/bin/python -m bench.micro.guard_bench [--reps 30]``.

Over a 2,000-file project whose overlay has N files rewritten and N/10 deleted (N = 1, 20, 1,000), times:

- ``changes()``: what every sandboxed command already paid before (the instructions check walked it);
- ``check``: ``guard.check_overlay`` on those changes (special files, links out, protected paths), the
  added work after every sandboxed command and hook;
- ``snapshot``: one walk of the upper layer; a command the live path would ask about costs two of them
  plus a ``changes()`` (``Approvals.expect`` / ``finish``);
- ``renames``: the pairing pass for the record's renames (one more ``changes()`` and the size and content
  comparisons), done in a thread when the fork finishes, on acceptance only for a fork still running.

Prints p50/p99 in ms.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from overlayfs import Overlay
from speculate.speculation.effects import renames, snapshot
from speculate.speculation.guard import Protection, check_overlay

PROJECT_FILES = 2000


def build_project(root: Path) -> list[str]:
    rels = [f"src/pkg{i % 40:02}/mod{i:04}.py" for i in range(PROJECT_FILES)]
    for i, rel in enumerate(rels):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(f"def f{i}():\n    return {i}\n".encode() * 20)
    return rels


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def timed(fn: Callable[[], object], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="guard_bench")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="guard-bench-") as tmp:
        root = Path(tmp) / "proj"
        rels = build_project(root)
        print(f"project: {PROJECT_FILES} files; {args.reps} reps; ms p50 / p99")
        print(f"{'N':>6} {'changes()':>16} {'check':>16} {'snapshot':>16} {'renames':>16}")
        for n in (1, 20, 1000):
            with Overlay(lower=root) as ov:
                for rel in rels[:n]:
                    ov.write_text(rel, "rewritten\n")
                for rel in rels[n : n + max(1, n // 10)]:
                    ov.unlink(rel)
                changes = ov.changes()
                prot = Protection(["deploy/"])
                cols = [
                    timed(ov.changes, args.reps),
                    timed(
                        functools.partial(check_overlay, ov, changes, protection=prot, command="cmd"),
                        args.reps,
                    ),
                    timed(functools.partial(snapshot, ov.upper), args.reps),
                    timed(lambda: renames(ov.changes(), ov.lower, ov.upper), args.reps),
                ]
            print(f"{n:>6} " + " ".join(f"{statistics.median(c):>7.2f} / {pct(c, 0.99):>6.2f}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
