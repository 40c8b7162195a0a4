"""Accept latency (promotion plus injection) and the cost of the start-up recovery check.

Run: ``.venv/bin/python -m bench.micro.accept_bench [--reps 100] [--reps-1000 20] [--dir DIR] [--not-durable]``.

Each rep opens a fresh default overlay over a 2,000-file project (in the project's state dir, as the
engine does), rewrites N files in it (untimed), then times what ``SpeculationEngine.accept`` does once the
fork has finished: ``Overlay.promote()`` (durable, the engine's default: conflict check, journal, staging,
commit, apply, upper-layer cleanup) and the injection of the fork's messages (``completed_part`` on a fork
conversation with one Edit per file, then ``extend``). The recovery check is ``recover_project`` on the
project with nothing pending, as every entry point runs it at start. Prints p50/p99 in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from overlayfs import Overlay, recover_project
from overlayfs.state import ENV, remove_tree, wait_disposals
from speculate.speculation.trim import completed_part

PROJECT_FILES = 2000


def build_project(root: Path) -> list[str]:
    rels = [f"src/pkg{i % 40:02}/mod{i:04}.py" for i in range(PROJECT_FILES)]
    for i, rel in enumerate(rels):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(f"def f{i}():\n    return {i}\n".encode() * 20)
    return rels


def fork_messages(rels: list[str]) -> list[dict[str, Any]]:
    """The fork's part of a conversation that edited ``rels``: prompt, one Edit and result per file, answer."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "do it"}]}]
    for i, rel in enumerate(rels):
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Editing {rel}."},
            {"type": "tool_use", "id": f"tu{i}", "name": "Edit",
             "input": {"file_path": rel, "old_string": "return", "new_string": "return 1 +"}}]})
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"tu{i}", "content": f"Edited {rel}."}]})
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    return msgs


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def accept_once(project: Path, rels: list[str], n: int, rep: int, durable: bool) -> tuple[float, float]:
    ov = Overlay(project)
    chosen = rels[(rep * n) % len(rels):][:n] or rels[:n]
    for rel in chosen:
        ov.write_bytes(rel, f"# {n} files, rep {rep}\n".encode() + b"x = 1\n" * 40)
    main: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                  {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}]
    fork = main + fork_messages(chosen)
    t0 = time.perf_counter()
    result = ov.promote(durable=durable)
    t1 = time.perf_counter()
    main.extend(completed_part(fork[2:], complete=True))
    t2 = time.perf_counter()
    assert result.ok and len(result.promoted) == n, result
    ov.discard()
    wait_disposals()  # the spent layers are deleted on a thread; the next acceptance is seconds away
    return t1 - t0, t2 - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.accept_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=100, help="reps for 1 and 20 files (default 100)")
    ap.add_argument("--reps-1000", type=int, default=20, help="reps for 1,000 files (default 20)")
    ap.add_argument("--dir", type=Path, default=None, help="where the project and state dir go "
                    "(default: a temp dir in $TMPDIR)")
    ap.add_argument("--not-durable", action="store_true", help="promote(durable=False): no data or directory "
                    "fsyncs (the journal's stay), to tell the disk's share from the rest")
    a = ap.parse_args(argv)
    top = Path(tempfile.mkdtemp(prefix="accept-bench-", dir=a.dir))
    os.environ[ENV] = str(top / "state")  # never the user's own state dir
    try:
        project = top / "project"
        rels = build_project(project)
        fs = subprocess.run(["stat", "-f", "-c", "%T", str(top)], capture_output=True, text=True).stdout.strip()
        durable = not a.not_durable
        print(f"# {PROJECT_FILES}-file project on {fs} ({top}); durable={durable}; {os.cpu_count()} cores, "
              f"kernel {os.uname().release}, Python {sys.version.split()[0]}")
        print("| files | reps | accept p50 (ms) | accept p99 (ms) | promote p50 (ms) | injection p50 (ms) |")
        print("|---|---|---|---|---|---|")
        for n, reps in ((1, a.reps), (20, a.reps), (1000, a.reps_1000)):
            accept_once(project, rels, n, -1, durable)  # warm-up
            runs = [accept_once(project, rels, n, r, durable) for r in range(reps)]
            prom, acc = [p for p, _ in runs], [t for _, t in runs]
            inj = [t - p for p, t in runs]
            print(f"| {n} | {reps} | {pct(acc, 0.5) * 1e3:.1f} | {pct(acc, 0.99) * 1e3:.1f} | "
                  f"{statistics.median(prom) * 1e3:.1f} | {statistics.median(inj) * 1e3:.2f} |", flush=True)
        checks = []
        for _ in range(2000):
            t = time.perf_counter()
            assert recover_project(project) is None
            checks.append(time.perf_counter() - t)
        print(f"\nstart-up recovery check, nothing pending (recover_project, 2000 reps): "
              f"p50 {pct(checks, 0.5) * 1e3:.3f} ms, p99 {pct(checks, 0.99) * 1e3:.3f} ms")
    finally:
        remove_tree(top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
