"""Does a speculation's cost grow with the change or with the project? Start and accept time, and peak RSS,
of one speculation that changes 20 files, on projects of 2,000 / 20,000 / 100,000 files, per backend, this
checkout's overlayfs against ``--baseline-rev``'s (issue #34 item 6).

Run: ``.venv/bin/python -m bench.micro.scale_bench [--sizes 2000,20000,100000] [--backends ...]
[--baseline-rev REV] [--dir DIR] [--reps 1] [--watch auto|inotify|snapshot]``.

Each project has half its files in a ``.gitignore``d ``node_modules/`` and half in ``src/`` (50 files a
directory, ~200 bytes each); it is made once under ``--dir`` (default ``/tmp/cost-bench``) and kept there
for the next run (delete it when done). One speculation is one fresh process (so that its peak RSS is its
own), in the order the engine runs it: a fresh bounded overlay and, for a mounted backend, its kept view
(:func:`overlayfs.sandbox.keep_view`), then the fork's one command, ``sed -i`` on 20 files of ``src/`` in
the sandbox (``pure``: the same edits through the view, as the Edit tool makes them); that is **start**
(after one untimed ``true`` on a throwaway overlay: the probes a process pays once, not each speculation).
**Accept** is what :meth:`SpeculationEngine.accept` runs after it: the dry-run conflict check
(:func:`speculate.speculation.accept.check`'s ``find_conflicts`` and ``refusals``) and ``Overlay.promote()``
(durable). RSS is the process's peak (``VmHWM``: ``ru_maxrss``
would keep the harness's own across the exec). The baseline's ``overlayfs`` is taken with ``git
archive`` and run the same way, interleaved run by run with this checkout's. ``--watch`` sets
``SPECULATE_TREE_WATCH`` for both (what stands for "everything was read" on kernel overlayfs and
fuse-overlayfs, :mod:`overlayfs.treewatch`; ``inotify`` is what a normal user gets).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.errors import BenchRunFailed

REPO = Path(__file__).resolve().parents[2]
CHANGED = 20
PER_DIR = 50
BACKENDS = ("pure", "fuse", "kernel", "fuse-overlayfs")

# One speculation; prints one JSON line. argv: project, backend, the 20 files (relative).
_RUN = r"""
import json, os, sys, time
from overlayfs import Overlay
from overlayfs.conflicts import find_conflicts
from overlayfs.policy import refusals
import overlayfs.sandbox as sb
lower, backend, files = sys.argv[1], sys.argv[2], sys.argv[3:]
def hwm_kib():  # this process's own peak: ru_maxrss keeps the parent's across fork and exec
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
if backend != "pure":  # what a process pays once (the backend's and the sandbox's probes), not a speculation
    warm = Overlay(lower, bound=sb.SandboxLimits().layer_bound())
    sb.run_sandboxed(warm, "true", timeout=300, backend=backend)
    warm.discard()
t0 = time.perf_counter()
ov = Overlay(lower, bound=sb.SandboxLimits().layer_bound())
if backend == "pure":
    for f in files:
        ov.write_text(f, ov.read_text(f).replace("return", "return 1 +"))
else:
    sb.keep_view(ov, backend)
    cmd = "sed -i 's/return/return 1 +/' " + " ".join(files)
    r = sb.run_sandboxed(ov, cmd, timeout=300, backend=backend)
    if r.exit_code != 0:
        print(json.dumps({"error": f"exit {r.exit_code}: {r.stderr[-500:]}"}))
        sys.exit(0)
t1 = time.perf_counter()
if ov.sandbox is not None:
    ov.sandbox.record_so_far()
bases, changes = ov.bases(), ov.changes()
conflicts, _ = find_conflicts(ov.lower, {c.path for c in changes} | set(bases), bases, ov.reads())
conflicts += refusals(str(ov.lower), str(ov.upper), changes)
t2 = time.perf_counter()
reads = len(ov.reads())
res = ov.promote()
t3 = time.perf_counter()
ov.discard()
from overlayfs.state import wait_disposals
wait_disposals()  # the spent layers are deleted on a thread this process would end under
out = {
    "start": t1 - t0, "check": t2 - t1, "promote": t3 - t2, "accept": t3 - t1,
    "rss_mib": hwm_kib() / 1024,
    "reads": reads, "changes": len(changes), "ok": res.ok and not conflicts,
    "conflicts": [c.path + ": " + c.reason for c in (conflicts or res.conflicts)][:3],
}
print(json.dumps(out))
"""


def build_project(root: Path, n: int) -> list[str]:
    """A project of ``n`` files (half under a gitignored ``node_modules/``), made once; the 20 to change."""
    done = root / ".made"
    half = n // 2
    src = [f"src/d{i // PER_DIR:04}/m{i:06}.py" for i in range(n - half)]
    if not done.exists():
        rels = src + [f"node_modules/p{i // PER_DIR:04}/lib/f{i:06}.js" for i in range(half)]
        for i, rel in enumerate(rels):
            p = root / rel
            if i % PER_DIR == 0:
                p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(f"def f{i}():\n    return {i}\n".encode() * 8)
        (root / ".gitignore").write_text("node_modules/\n")
        done.write_text(f"{n}\n")
    step = max(1, len(src) // CHANGED)
    return src[::step][:CHANGED]


class Tree:
    """One revision's ``overlayfs`` on a path (``rev`` None: this checkout's)."""

    def __init__(self, rev: str | None) -> None:
        self.rev = rev
        self._dir = tempfile.TemporaryDirectory(prefix="scale-bench-old-") if rev else None
        self.path = os.fspath(REPO)
        if self._dir is not None and rev:
            archive = subprocess.run(
                ["git", "-C", self.path, "archive", rev, "overlayfs"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", self._dir.name], input=archive.stdout, check=True)
            self.path = self._dir.name

    def run(self, lower: Path, backend: str, files: list[str], watch: str = "auto") -> dict[str, Any]:
        extra = os.environ.get("PYTHONPATH")
        r = subprocess.run(
            [sys.executable, "-c", _RUN, os.fspath(lower), backend, *files],
            env={
                **os.environ,
                "PYTHONPATH": self.path + (os.pathsep + extra if extra else ""),
                "SPECULATE_TREE_WATCH": watch,
            },
            capture_output=True,
            text=True,
            cwd=self.path,
            timeout=900,
        )
        lines = r.stdout.strip().splitlines()
        if r.returncode != 0 or not lines:
            raise BenchRunFailed(f"{backend} on {lower} ({self.rev or 'this checkout'}): {r.stderr[-2000:]}")
        out: dict[str, Any] = json.loads(lines[-1])
        if "error" in out or not out["ok"]:
            raise BenchRunFailed(f"{backend} on {lower} ({self.rev or 'this checkout'}): {out}")
        return out

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,20000,100000")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--baseline-rev", default=None, help="also run this revision's overlayfs")
    ap.add_argument("--dir", default="/tmp/cost-bench", help="where the projects are made and kept")
    ap.add_argument("--reps", type=int, default=1, help="speculations per cell (medians printed)")
    ap.add_argument("--watch", default="auto", help="SPECULATE_TREE_WATCH: auto, inotify or snapshot")
    args = ap.parse_args(argv)
    from overlayfs import available_backends

    here = available_backends()
    trees = [Tree(None)] + ([Tree(args.baseline_rev)] if args.baseline_rev else [])
    rows: list[tuple[str, int, str, dict[str, float]]] = []
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            lower = Path(args.dir) / f"p{n}"
            lower.mkdir(parents=True, exist_ok=True)
            files = build_project(lower, n)
            for backend in args.backends.split(","):
                if backend not in here:
                    print(f"# {backend}: not available here", file=sys.stderr)
                    continue
                got: list[list[dict[str, Any]]] = [[] for _ in trees]
                for _ in range(args.reps):
                    for t, g in zip(reversed(trees), reversed(got), strict=True):  # the baseline first
                        g.append(t.run(lower, backend, files, args.watch))
                for t, g in zip(trees, got, strict=True):
                    med = {k: statistics.median(r[k] for r in g) for k in ("start", "accept", "rss_mib")}
                    med["reads"] = g[-1]["reads"]
                    rows.append((t.rev or "this", n, backend, med))
                    print(
                        f"# {t.rev or 'this':>10} {n:>7} {backend:<15} start {med['start']:.3f} s  "
                        f"accept {med['accept']:.3f} s  rss {med['rss_mib']:.0f} MiB  reads {med['reads']}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        for t in trees:
            t.close()
    print("| revision | files | backend | start s | accept s | peak RSS MiB | read records |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for rev, n, backend, m in sorted(rows, key=lambda r: (r[2], r[0] != "this", r[1])):
        print(
            f"| {rev} | {n:,} | {backend} | {m['start']:.3f} | {m['accept']:.3f} | {m['rss_mib']:.0f} | "
            f"{m['reads']:,} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
