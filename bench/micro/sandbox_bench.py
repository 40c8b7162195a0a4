"""Sandbox benchmarks: start-up cost per command, the sample project's pytest inside it, cancel latency.

Run: ``.venv/bin/python -m bench.micro.sandbox_bench [--reps 15] [--baseline-rev 8e84826]``. Start-up is
``true`` run as speculative Bash runs it (fresh overlay each time, mount, sandbox, exit, unmount), against a
native ``bash -c true`` and against the previous sandbox (mount and PID namespaces only, no bubblewrap,
seccomp or Landlock), which is taken from ``--baseline-rev`` with ``git archive`` and timed in the same run.
Cancel latency is from :meth:`CancelToken.cancel` to the return of a running ``sleep 30``. Prints medians
(and max for cancel) in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from overlayfs import Overlay
from overlayfs.mount import unavailable_reason
from overlayfs.sandbox import run_sandboxed
from overlayfs.sandbox.run import wait_cancel_latency

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "bench" / "scenarios" / "workspaces" / "sample_project"
BACKENDS = ("kernel", "fuse", "fuse-overlayfs")
_OLD_TIMER = """
import json, statistics, sys, time
from overlayfs import Overlay
from overlayfs.sandbox import run_sandboxed
lower, backend, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = []
for _ in range(reps):
    ov = Overlay(lower)
    t = time.perf_counter()
    r = run_sandboxed(ov, "true", timeout=60, backend=backend)
    out.append(time.perf_counter() - t)
    ov.discard()
    assert r.exit_code == 0, r
print(json.dumps(statistics.median(out)))
"""


def median_ms(fn: object, reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


def startup(lower: Path, backend: str, reps: int) -> float:
    def once() -> None:
        ov = Overlay(lower)
        try:
            r = run_sandboxed(ov, "true", timeout=60, backend=backend)
            assert r.exit_code == 0, r
        finally:
            ov.discard()

    once()  # warm: the probes and the seccomp filter are computed once per process
    return median_ms(once, reps)


def old_startup(lower: Path, backend: str, reps: int, rev: str) -> float | None:
    """The previous sandbox's start-up, from ``rev``'s overlayfs package in a subprocess."""
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-old-") as d:
        archive = subprocess.run(["git", "-C", os.fspath(REPO), "archive", rev, "overlayfs"], capture_output=True)
        if archive.returncode != 0:
            print(f"# no baseline: git archive {rev} failed: {archive.stderr.decode().strip()}", file=sys.stderr)
            return None
        subprocess.run(["tar", "-x", "-C", d], input=archive.stdout, check=True)
        env = {**os.environ, "PYTHONPATH": d}
        r = subprocess.run([sys.executable, "-c", _OLD_TIMER, os.fspath(lower), backend, str(reps + 1)],
                           env=env, capture_output=True, text=True, cwd=d)
        if r.returncode != 0:
            print(f"# baseline {rev} failed on {backend}: {r.stderr.strip()[-300:]}", file=sys.stderr)
            return None
        return float(json.loads(r.stdout)) * 1000


def pytest_ms(lower: Path, backend: str | None, reps: int) -> float:
    cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider"

    def once() -> None:
        if backend is None:
            r = subprocess.run(cmd, shell=True, cwd=lower, capture_output=True)
            assert r.returncode == 0, r.stdout[-500:]
            return
        ov = Overlay(lower)
        try:
            s = run_sandboxed(ov, cmd, timeout=300, backend=backend)
            assert s.exit_code == 0, s.stdout[-500:] + s.stderr[-500:]
        finally:
            ov.discard()

    once()
    return median_ms(once, reps)


def cancel_ms(lower: Path, backend: str) -> float:
    ov = Overlay(lower)
    try:
        return wait_cancel_latency(ov, backend=backend) * 1000
    finally:
        ov.discard()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.sandbox_bench", description=__doc__)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--baseline-rev", default="8e84826", help="git revision of the previous sandbox")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    args = ap.parse_args(argv)
    backends = [b for b in args.backends.split(",") if unavailable_reason(b) is None]
    for b in set(args.backends.split(",")) - set(backends):
        print(f"# skipping {b}: {unavailable_reason(b)}")
    top = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
    try:
        lower = top / "project"
        shutil.copytree(SAMPLE, lower, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        native = median_ms(lambda: subprocess.run(["bash", "-c", "true"], check=True), args.reps)
        rows = []
        for b in backends:
            new = startup(lower, b, args.reps)
            old = old_startup(lower, b, args.reps, args.baseline_rev)
            py_native = pytest_ms(lower, None, max(3, args.reps // 3))
            py_box = pytest_ms(lower, b, max(3, args.reps // 3))
            cancels = [cancel_ms(lower, b) for _ in range(args.reps)]
            rows.append((b, new, old, py_native, py_box, statistics.median(cancels), max(cancels)))
            print(f"# {b}: done", file=sys.stderr)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"\nms, median of {args.reps} (pytest: of {max(3, args.reps // 3)}); {os.cpu_count()} cores, "
          f"kernel {os.uname().release}; native `bash -c true`: {native:.1f} ms")
    print("| backend | start-up (new) | start-up (previous sandbox) | pytest native | pytest sandboxed "
          "| cancel p50 | cancel max |")
    print("|---|---|---|---|---|---|---|")
    for b, new, old, pn, pb, c50, cmax in rows:
        old_s = f"{old:.0f}" if old is not None else "n/a"
        print(f"| {b} | {new:.0f} | {old_s} | {pn:.0f} | {pb:.0f} ({pb / pn:.2f}x) | {c50:.1f} | {cmax:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
