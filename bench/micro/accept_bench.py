"""Accept latency (promotion plus injection), the cost of the commit-point re-checks, the conflict window,
and the cost of the start-up recovery check.

Run: ``.venv/bin/python -m bench.micro.accept_bench [--reps 100] [--reps-1000 20] [--dir DIR] [--not-durable]
[--breakdown N] [--identity]``.

Each rep opens a fresh default overlay over a 2,000-file project (in the project's state dir, as the
engine does), rewrites N files in it (untimed), then times what ``SpeculationEngine.accept`` does once the
fork has finished: ``Overlay.promote()`` (durable, the engine's default: conflict check, journal, staging,
commit, apply, upper-layer cleanup) and the injection of the fork's messages (``completed_part`` on a fork
conversation with one Edit per file, then ``extend``). The recovery check is ``recover_project`` on the
project with nothing pending, as every entry point runs it at start. Prints p50/p99 in ms.

Every rep runs twice, in alternating order: with the identity re-checks that hold the conflict check up to
each file's own commit point (``after``) and with them turned off (``before``: ``overlayfs.steps.RECHECK =
False``, which only this benchmark sets; the copy size checks and the landing policy stay on, they cost an
``fstat`` and a mode mask per file). The conflict window per replaced file: ``before``, from the end of the
conflict check to the file's rename (an edit landing there was overwritten); ``after``, from the file's last
identity check to its swap (what is left; a replacement or deletion there is still caught by the check of
what the swap displaced, see docs/overlay.md).

``--breakdown N`` adds where the time of a promotion of N files goes (p50 per step) and its sequential
durability rounds: every fsync, fdatasync and syncfs is timed on whatever thread issues it, and calls that
overlap in time count as one round (the promotion waits for each round before its next step).

``--identity`` prints only ``promote()`` p50 at 1 / 20 / 1,000 files before and after the identity work of
issue #34 (``before``: ``overlayfs.inplace.IDENTITY = False``, which only this benchmark sets: every file a
replacement, no xattr looked at or carried), interleaved rep by rep in one run, for files changed in place
(an append through the view) that are plain (after: the xattr and link checks only) and that have a second
hard link outside the project (after: written in place, with a backup copy of the old bytes first).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.errors import BenchRunFailed
from overlayfs import Overlay, flush, inplace, journal, recover_project, steps
from overlayfs import promote as promote_mod
from overlayfs.state import ENV, remove_tree, wait_disposals
from speculate.speculation.trim import completed_part
from speculate.types import Message

PROJECT_FILES = 2000


def build_project(root: Path) -> list[str]:
    rels = [f"src/pkg{i % 40:02}/mod{i:04}.py" for i in range(PROJECT_FILES)]
    for i, rel in enumerate(rels):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(f"def f{i}():\n    return {i}\n".encode() * 20)
    return rels


def fork_messages(rels: list[str]) -> list[Message]:
    """The fork's part of a conversation that edited ``rels``: prompt, one Edit and result per file, answer."""
    msgs: list[Message] = [{"role": "user", "content": [{"type": "text", "text": "do it"}]}]
    for i, rel in enumerate(rels):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Editing {rel}."},
                    {
                        "type": "tool_use",
                        "id": f"tu{i}",
                        "name": "Edit",
                        "input": {"file_path": rel, "old_string": "return", "new_string": "return 1 +"},
                    },
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"tu{i}", "content": f"Edited {rel}."}],
            }
        )
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    return msgs


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def accept_once(
    project: Path, rels: list[str], n: int, rep: int, durable: bool, recheck: bool, windows: list[float]
) -> tuple[float, float]:
    ov = Overlay(project)
    chosen = rels[(rep * n) % len(rels) :][:n] or rels[:n]
    for rel in chosen:
        ov.write_bytes(rel, f"# {n} files, rep {rep}, {recheck}\n".encode() + b"x = 1\n" * 40)
    main: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]
    fork = main + fork_messages(chosen)
    steps.RECHECK = recheck
    steps.WINDOWS = []
    checked: list[float] = []
    real_check = promote_mod.find_conflicts

    def timed_check(*args: Any) -> Any:
        out = real_check(*args)
        checked.append(time.perf_counter())
        return out

    promote_mod.find_conflicts = timed_check  # type: ignore[assignment]  # a timing wrapper, put back below
    try:
        t0 = time.perf_counter()
        result = ov.promote(durable=durable)
        t1 = time.perf_counter()
    finally:
        promote_mod.find_conflicts = real_check
        steps.RECHECK = True
    main.extend(completed_part(fork[2:], complete=True))
    t2 = time.perf_counter()
    if not result.ok or len(result.promoted) != n:
        raise BenchRunFailed(f"promoting {n} files: {result}")
    windows.extend(done - (start if recheck else checked[0]) for start, done in steps.WINDOWS)
    steps.WINDOWS = None
    ov.discard()
    wait_disposals()  # the spent layers are deleted on a thread; the next acceptance is seconds away
    return t1 - t0, t2 - t0


def identity_once(
    project: Path, links: Path, rels: list[str], n: int, rep: int, on: bool, linked: bool
) -> float:
    """``promote()`` of ``n`` files appended to in a fresh overlay, with the identity work on or off; each file
    with a second link in ``links`` (made again where the last replacement broke it) when ``linked``."""
    chosen = rels[(rep * n) % len(rels) :][:n] or rels[:n]
    for rel in chosen:
        link = links / rel.replace("/", "_")
        if linked and (not link.exists() or link.stat().st_ino != (project / rel).stat().st_ino):
            link.unlink(missing_ok=True)
            os.link(project / rel, link)
        elif not linked and (project / rel).stat().st_nlink > 1:
            link.unlink()
    ov = Overlay(project)
    for rel in chosen:
        with ov.open(rel, "a") as f:
            f.write(f"# rep {rep}, {on}\n")
    inplace.IDENTITY = on
    try:
        t0 = time.perf_counter()
        result = ov.promote()
        t = time.perf_counter() - t0
    finally:
        inplace.IDENTITY = True
    if not result.ok or len(result.promoted) != n:
        raise BenchRunFailed(f"promoting {n} files: {result}")
    if linked and on and (project / chosen[0]).stat().st_nlink < 2:
        raise BenchRunFailed(f"{chosen[0]} was not written in place")
    ov.discard()
    wait_disposals()
    return t


def identity(project: Path, top: Path, rels: list[str], reps: int, reps_1000: int) -> None:
    links = top / "links"
    links.mkdir(exist_ok=True)
    print("\npromote() p50 before / after the identity work (#34; interleaved rep by rep), ms:\n")
    print(
        "| files | reps | plain files: before / after | a second hard link each: before (replaced) / after (in place) |"
    )
    print("|---|---|---|---|")
    for n, k in ((1, reps), (20, reps), (1000, reps_1000)):
        if k <= 0:
            continue
        out = {}
        for linked in (False, True):
            for on in (False, True):
                identity_once(project, links, rels, n, -1, on, linked)  # warm-up
            runs: dict[bool, list[float]] = {False: [], True: []}
            for r in range(k):
                for on in (False, True) if r % 2 else (True, False):
                    runs[on].append(identity_once(project, links, rels, n, r, on, linked))
            out[linked] = f"{pct(runs[False], 0.5) * 1e3:.1f} / {pct(runs[True], 0.5) * 1e3:.1f}"
        print(f"| {n} | {k} | {out[False]} | {out[True]} |", flush=True)


# The steps of a promotion the breakdown times: (label, owner, attribute).
PHASES = (
    ("journal the plan (begin)", journal, "begin"),
    ("prepare: stage and sync", steps.Steps, "prepare"),
    ("journal marks (commit, finish)", journal, "mark"),
    ("apply: swap in and sync", steps.Steps, "apply"),
    ("finish: drop backups, trash", steps.Steps, "finish"),
    ("clear the upper layer", promote_mod, "_finalize_journal"),
    ("clear the journal", journal, "clear"),
)


@contextlib.contextmanager
def timed(phases: dict[str, float], syncs: list[tuple[float, float]]) -> Iterator[None]:
    """Add each step's time to ``phases`` and each sync call's (start, end) to ``syncs`` while inside."""
    saved: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, record: Callable[[float, float], None]) -> None:
        real = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                record(t, time.perf_counter())

        saved.append((owner, name, real))
        setattr(owner, name, call)

    for label, owner, name in PHASES:

        def add(t: float, u: float, label: str = label) -> None:
            phases[label] = phases.get(label, 0.0) + u - t

        wrap(owner, name, add)
    for owner, name in [(os, "fsync"), (os, "fdatasync"), (flush, "syncfs")]:
        wrap(owner, name, lambda t, u: syncs.append((t, u)))
    try:
        yield
    finally:
        for owner, name, real in reversed(saved):
            setattr(owner, name, real)


HOW: dict[str, int] = {}  # durable batches by how they were synced ("syncfs", "fsync")


def counted(real: Callable[..., str]) -> Callable[..., str]:
    def sync(*args: Any) -> str:
        how = real(*args)
        HOW[how] = HOW.get(how, 0) + 1
        return how

    return sync


def rounds(calls: list[tuple[float, float]]) -> tuple[int, float]:
    """Sync calls that overlap in time merged into rounds: (how many, their total wall time)."""
    n, total, end = 0, 0.0, -1.0
    for t, u in sorted(calls):
        if t > end:
            n += 1
            total += u - t
        elif u > end:
            total += u - end
        end = max(end, u)
    return n, total


def breakdown(project: Path, rels: list[str], n: int, reps: int, durable: bool) -> None:
    runs: list[tuple[float, dict[str, float], tuple[int, float]]] = []
    for r in range(-1, reps):  # rep numbers of their own: a rewrite identical to the real file is no change
        phases: dict[str, float] = {}
        syncs: list[tuple[float, float]] = []
        with timed(phases, syncs):
            total = accept_once(project, rels, n, 10**6 + r, durable, True, [])[0]
        if r >= 0:
            runs.append((total, phases, rounds(syncs)))
    print(f"\nwhere a promotion of {n} files goes (durable={durable}, {reps} reps; p50 of each, ms):\n")
    print("| step | p50 (ms) |")
    print("|---|---|")
    med = statistics.median
    for label, _, _ in PHASES:
        print(f"| {label} | {med([p.get(label, 0.0) for _, p, _ in runs]) * 1e3:.2f} |")
    rest = [t - sum(p.values()) for t, p, _ in runs]
    print(f"| the rest (lock, changes, conflict check, plan) | {med(rest) * 1e3:.2f} |")
    print(f"| **promote()** | {med([t for t, _, _ in runs]) * 1e3:.2f} |")
    print(
        f"| sequential sync rounds: count p50 (min-max) / their wall time p50 | "
        f"{med([k for _, _, (k, _) in runs]):.0f} ({min(k for _, _, (k, _) in runs)}-"
        f"{max(k for _, _, (k, _) in runs)}) / {med([w for _, _, (_, w) in runs]) * 1e3:.2f} |",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.micro.accept_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--reps", type=int, default=100, help="reps for 1 and 20 files (default 100)")
    ap.add_argument(
        "--reps-1000", type=int, default=20, help="reps for 1,000 files (default 20; 0 leaves that row out)"
    )
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where the project and state dir go (default: a temp dir in $TMPDIR)",
    )
    ap.add_argument(
        "--not-durable",
        action="store_true",
        help="promote(durable=False): no data or directory "
        "fsyncs (the journal's stay), to tell the disk's share from the rest",
    )
    ap.add_argument(
        "--no-syncfs",
        action="store_true",
        help="durable batches always by per-file and "
        "per-directory fsyncs (overlayfs.flush.SYNCFS = False), to compare with syncfs",
    )
    ap.add_argument(
        "--identity",
        action="store_true",
        help="only promote() before and after the identity work (#34): plain and hard-linked files",
    )
    ap.add_argument(
        "--breakdown",
        type=int,
        default=0,
        metavar="N",
        help="also time the steps and the sync rounds of a promotion of N files (--reps reps)",
    )
    a = ap.parse_args(argv)
    top = Path(tempfile.mkdtemp(prefix="accept-bench-", dir=a.dir))
    os.environ[ENV] = str(top / "state")  # never the user's own state dir
    try:
        project = top / "project"
        rels = build_project(project)
        fs = subprocess.run(
            ["stat", "-f", "-c", "%T", str(top)], capture_output=True, text=True
        ).stdout.strip()
        durable = not a.not_durable
        flush.SYNCFS = not a.no_syncfs
        flush.Flush.sync = counted(flush.Flush.sync)  # type: ignore[method-assign]  # counts, same result
        load = Path("/proc/loadavg").read_text().split()[:3]
        if a.identity:
            print(
                f"# {PROJECT_FILES}-file project on {fs} ({top}); durable=True; load average {' '.join(load)}"
            )
            identity(project, top, rels, a.reps, a.reps_1000)
            print(f"load average at the end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
            return 0
        print(
            f"# {PROJECT_FILES}-file project on {fs} ({top}); durable={durable}; {os.cpu_count()} cores, "
            f"kernel {os.uname().release}, Python {sys.version.split()[0]}"
        )
        print(
            "| files | reps | promote p50 before / after (ms) | promote p99 before / after (ms) | "
            "accept p50 after (ms) | injection p50 (ms) |"
        )
        print("|---|---|---|---|---|---|")
        windows: dict[tuple[int, bool], list[float]] = {}
        for n, reps in ((1, a.reps), (20, a.reps), (1000, a.reps_1000)):
            if reps <= 0:
                continue
            for recheck in (False, True):
                accept_once(project, rels, n, -1, durable, recheck, [])  # warm-up
            runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for r in range(reps):
                for recheck in (False, True) if r % 2 else (True, False):
                    w = windows.setdefault((n, recheck), [])
                    runs[recheck].append(accept_once(project, rels, n, r, durable, recheck, w))
            prom = {k: [p for p, _ in v] for k, v in runs.items()}
            acc = [t for _, t in runs[True]]
            inj = [t - p for p, t in runs[True]]
            print(
                f"| {n} | {reps} | {pct(prom[False], 0.5) * 1e3:.1f} / {pct(prom[True], 0.5) * 1e3:.1f} | "
                f"{pct(prom[False], 0.99) * 1e3:.1f} / {pct(prom[True], 0.99) * 1e3:.1f} | "
                f"{pct(acc, 0.5) * 1e3:.1f} | {statistics.median(inj) * 1e3:.2f} |",
                flush=True,
            )
        print("\n| files | conflict window before: p50 / max (ms) | after: p50 / p99 / max (µs) |")
        print("|---|---|---|")
        for n in (n for n in (1, 20, 1000) if (n, True) in windows):
            b, w = windows[(n, False)], windows[(n, True)]
            print(
                f"| {n} | {pct(b, 0.5) * 1e3:.2f} / {max(b) * 1e3:.2f} | {pct(w, 0.5) * 1e6:.1f} / "
                f"{pct(w, 0.99) * 1e6:.1f} / {max(w) * 1e6:.1f} |",
                flush=True,
            )
        if a.breakdown:
            breakdown(project, rels, a.breakdown, a.reps, durable)
        checks = []
        for _ in range(2000):
            t = time.perf_counter()
            if (recovered := recover_project(project)) is not None:
                raise BenchRunFailed(f"the recovery check found something pending: {recovered}")
            checks.append(time.perf_counter() - t)
        print(
            f"\ndurable batches (two per promotion): {HOW.get('syncfs', 0)} by one syncfs, {HOW.get('fsync', 0)} "
            f"by fsyncs (overlayfs.flush: syncfs {'off' if a.no_syncfs else 'on'}, limit "
            f"{flush.DIRTY_LIMIT >> 20} MiB of others' dirty data); load average "
            f"{' '.join(load)} at the start, {' '.join(Path('/proc/loadavg').read_text().split()[:3])} at the end"
        )
        print(
            f"\nstart-up recovery check, nothing pending (recover_project, 2000 reps): "
            f"p50 {pct(checks, 0.5) * 1e3:.3f} ms, p99 {pct(checks, 0.99) * 1e3:.3f} ms"
        )
    finally:
        remove_tree(top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
