"""Sandbox benchmarks: start-up cost per command, the sample project's pytest inside it, cancel latency.

Run: ``.venv/bin/python -m bench.micro.sandbox_bench [--reps 15] [--baseline-rev REV] [--startup-only]``.
Start-up is ``true`` run as speculative Bash runs it, in rounds shaped like a speculation: a fresh overlay
(its shell keeps one mounted view for it where the revision can, ``keep_view``), a first command (which
mounts), ``--commands`` more, then as many more each right after a file-tool write to the overlay (which the
kept view must be told of), then discard (unmount). Against a native ``bash -c true`` and against
``--baseline-rev``'s sandbox (its ``overlayfs`` taken with ``git archive``), the two timed in separate
processes but interleaved round by round, so that a loaded machine slows both alike. Making the overlay is
timed apart (a bounded one makes its tmpfs then, once per speculation, not per command). Cancel latency is
from :meth:`CancelToken.cancel` to the return of a running ``sleep 30``. Prints medians (and max for
cancel) in ms.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import BenchRunFailed
from overlayfs import Overlay
from overlayfs.mount import unavailable_reason
from overlayfs.sandbox import run_sandboxed
from overlayfs.sandbox.run import wait_cancel_latency

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "bench" / "scenarios" / "workspaces" / "sample_project"
BACKENDS = ("kernel", "fuse", "fuse-overlayfs")
# One speculation per line read: seconds to make the overlay, of the first `true` (mounts), of each later
# one, of each later one right after a file-tool write, and of discard.
_TIMER = """
import json, resource, sys, time
from overlayfs import Overlay
import overlayfs.sandbox as sb
lower, backend, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
bound = sb.SandboxLimits().layer_bound() if hasattr(sb.SandboxLimits, "layer_bound") else None
cpu_used = []
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
def run(ov):
    c, t = cpu(), time.perf_counter()
    r = sb.run_sandboxed(ov, "true", timeout=60, backend=backend)
    assert r.exit_code == 0, r
    cpu_used.append(cpu() - c)
    return time.perf_counter() - t
for _ in sys.stdin:
    t0 = time.perf_counter()
    ov = Overlay(lower, bound=bound) if bound is not None else Overlay(lower)
    t1 = time.perf_counter()
    if hasattr(sb, "keep_view"):
        sb.keep_view(ov, backend)
    first = run(ov)
    later = [run(ov) for _ in range(n)]
    edited = []
    for i in range(n):
        ov.write_text(f"edit{i % 3}.txt", f"edit {i}\\n")
        edited.append(run(ov))
    t2 = time.perf_counter()
    ov.discard()
    print(json.dumps([t1 - t0, first, later, edited, time.perf_counter() - t2, cpu_used[1:1 + n]]), flush=True)
    cpu_used.clear()
"""


def median_ms(fn: Callable[[], object], reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


class Timer:
    """A process timing start-ups with one revision's overlayfs (this checkout's, or ``rev``'s from
    ``git archive``), one per :meth:`once`, so that the two are interleaved round by round."""

    def __init__(self, lower: Path, backend: str, rev: str | None, commands: int) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="sandbox-bench-old-") if rev else None
        path = os.fspath(REPO)
        if self._dir is not None and rev:
            archive = subprocess.run(
                ["git", "-C", path, "archive", rev, "overlayfs"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", self._dir.name], input=archive.stdout, check=True)
            path = self._dir.name
        extra = os.environ.get("PYTHONPATH")  # a normal user's run may name the venv's packages there
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _TIMER, os.fspath(lower), backend, str(commands)],
            env={**os.environ, "PYTHONPATH": path + (os.pathsep + extra if extra else "")},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=path,
        )
        self.once()  # warm: the probes and the seccomp filter are computed once per process

    def once(self) -> list[Any]:
        """[make, first command, [later commands], [later commands after a write], discard] in seconds."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the start-up timer exited ({self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()
        if self._dir is not None:
            self._dir.cleanup()


STARTUP_COLUMNS = (
    "overlay made",
    "first command",
    "later command",
    "after a file-tool write",
    "discard",
    "CPU per later command",
)


def startups(
    lower: Path, backend: str, reps: int, rev: str | None, commands: int = 5
) -> tuple[list[float], list[float] | None]:
    """Medians (ms) of :data:`STARTUP_COLUMNS`, this checkout's and ``rev``'s, interleaved round by round."""
    timers = [Timer(lower, backend, None, commands)]
    try:
        if rev:
            timers.append(Timer(lower, backend, rev, commands))
    except (subprocess.CalledProcessError, RuntimeError) as e:
        print(f"# no baseline {rev} on {backend}: {e}", file=sys.stderr)
    try:
        got: list[list[list[Any]]] = [[] for _ in timers]
        for _ in range(reps):
            for t, out in zip(timers, got, strict=True):
                out.append(t.once())
    finally:
        for t in timers:
            t.close()

    def med(rounds: list[list[Any]], i: int) -> float:
        xs = [x for r in rounds if len(r) > i for x in (r[i] if isinstance(r[i], list) else [r[i]])]
        return statistics.median(xs) * 1000 if xs else float("nan")

    meds = [[med(out, i) for i in range(len(STARTUP_COLUMNS))] for out in got]
    return meds[0], meds[1] if len(meds) > 1 else None


def pytest_ms(lower: Path, backend: str | None, reps: int) -> float:
    cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider"

    def once() -> None:
        if backend is None:
            r = subprocess.run(cmd, shell=True, cwd=lower, capture_output=True)
            if r.returncode != 0:
                raise BenchRunFailed(f"{cmd} exited {r.returncode}: {r.stdout[-500:]!r}")
            return
        ov = Overlay(lower)
        try:
            s = run_sandboxed(ov, cmd, timeout=300, backend=backend)
            if s.exit_code != 0:
                raise BenchRunFailed(
                    f"{cmd} in the sandbox exited {s.exit_code}: {s.stdout[-500:] + s.stderr[-500:]!r}"
                )
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
    ap.add_argument(
        "--baseline-rev",
        default="572df98",
        help="git revision of the previous sandbox (default: before issue #27)",
    )
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--startup-only", action="store_true", help="skip the pytest and cancel figures")
    ap.add_argument("--commands", type=int, default=5, help="later commands per speculation, each way")
    args = ap.parse_args(argv)
    backends = [b for b in args.backends.split(",") if unavailable_reason(b) is None]
    for b in set(args.backends.split(",")) - set(backends):
        print(f"# skipping {b}: {unavailable_reason(b)}")
    top = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
    try:
        lower = top / "project"
        shutil.copytree(SAMPLE, lower, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        native = median_ms(lambda: subprocess.run(["bash", "-c", "true"], check=True), args.reps)
        rows: list[tuple[str, list[float], list[float] | None, tuple[float, float, float, float] | None]] = []
        for b in backends:
            new, old = startups(lower, b, args.reps, args.baseline_rev, args.commands)
            if args.startup_only:
                rows.append((b, new, old, None))
                continue
            py_native = pytest_ms(lower, None, max(3, args.reps // 3))
            py_box = pytest_ms(lower, b, max(3, args.reps // 3))
            cancels = [cancel_ms(lower, b) for _ in range(args.reps)]
            rows.append((b, new, old, (py_native, py_box, statistics.median(cancels), max(cancels))))
            print(f"# {b}: done", file=sys.stderr)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(
        f"\nms, median of {args.reps} speculations of 1 + {2 * args.commands} commands (pytest: of "
        f"{max(3, args.reps // 3)}); uid {os.geteuid()}, {os.cpu_count()} cores, kernel {os.uname().release}, "
        f"load average {os.getloadavg()[0]:.1f}; native `bash -c true`: {native:.1f} ms; "
        f"previous: {args.baseline_rev}, interleaved round by round; CPU: user+sys of the timing process and "
        "the sandbox's processes per later command (steadier than seconds on a loaded machine)"
    )
    print(
        "| backend | "
        + " | ".join(f"{c} (previous)" for c in STARTUP_COLUMNS)
        + " | pytest native | pytest sandboxed | cancel p50 | cancel max |"
    )
    print("|---" * (len(STARTUP_COLUMNS) + 5) + "|")
    for b, new, old, rest in rows:
        cells = [
            f"{n:.1f} ({o:.1f})" if old is not None else f"{n:.1f} (n/a)"
            for n, o in zip(new, old or new, strict=True)
        ]
        more = "| | | |"
        if rest is not None:
            pn, pb, c50, cmax = rest
            more = f"{pn:.0f} | {pb:.0f} ({pb / pn:.2f}x) | {c50:.1f} | {cmax:.1f} |"
        print(f"| {b} | " + " | ".join(cells) + f" | {more}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
