"""Mounted-overlay micro benchmarks: native vs kernel overlayfs vs our FUSE server (on each of its transports:
``fuse`` the one it chooses, named in its column, and ``fuse-pyfuse3``) vs fuse-overlayfs.

Run: ``.venv/bin/python -m bench.micro.mount_bench [--reps 5] [--files 5000] [--big-mb 200] [--baseline-rev REV]``.
``--baseline-rev`` adds a column for the FUSE server of that revision (its ``overlayfs`` taken with ``git
archive``, started the same way), timed in the same rounds as the others. Each timed run
gets a fresh overlay (empty upper) and a fresh mount, so every figure is a first pass through the mount;
the lower tree is page-cached (one warm-up read natively). Prints a table of median ms and the ratio to
native (copy-up: ratio to a native copy of the file). Workloads run as the tools would: shell commands (find, cat, dd, grep), Python file I/O for
creates/appends and copy-up, and the sample project's pytest suite end to end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

from bench.errors import BenchRunFailed
from overlayfs import Overlay
from overlayfs.backends import FuseBackend, get
from overlayfs.mount import mounted, unavailable_reason
from overlayfs.sandbox import SandboxLimits, run_sandboxed

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "bench" / "scenarios" / "workspaces" / "sample_project"
BACKENDS = ("kernel", "fuse", "fuse-pyfuse3", "fuse-overlayfs")


def build_tree(root: Path, files: int, big_mb: int) -> None:
    payload = os.urandom(5000).hex().encode()  # 10 KB per file: 5k files = 50 MB
    per_dir = 100
    for i in range(files):
        d = root / "tree" / f"d{i // per_dir:03d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        (d / f"f{i:05d}.txt").write_bytes(payload)
    with open(root / "big.bin", "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(big_mb):
            f.write(chunk)
    (root / "log.txt").write_text("start\n")
    shutil.copytree(
        SAMPLE, root / "project", ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".ruff_cache")
    )


def sh(cmd: str, cwd: Path) -> None:
    subprocess.run(cmd, shell=True, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def creates(root: Path) -> None:
    d = root / "created"
    d.mkdir()
    for i in range(1000):
        (d / f"n{i}.txt").write_bytes(b"x" * 100)
    for _ in range(100):
        with open(root / "log.txt", "ab") as f:
            f.write(b"appended line\n")


def copy_up(root: Path) -> None:
    with open(root / "big.bin", "r+b") as f:  # opening for write copies the whole file up
        f.write(b"!")


PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider project/tests"
WORKLOADS: dict[str, Callable[[Path], None]] = {
    "find (5k-file tree)": lambda r: sh("find tree | wc -l", r),
    "cat all 5k files": lambda r: sh("find tree -type f -print0 | xargs -0 cat > /dev/null", r),
    "sequential read 200 MB": lambda r: sh("dd if=big.bin of=/dev/null bs=1M status=none", r),
    "grep -r (no match)": lambda r: sh("grep -r zzqqzz tree || true", r),
    "1k creates + 100 appends": creates,
    "copy-up 200 MB": copy_up,
    "pytest sample project": lambda r: sh(PYTEST, r),
}


# What the native side does for a workload that only exists on an overlay: copy-up is a file copy.
NATIVE_EQUIVALENT: dict[str, Callable[[Path], object]] = {
    "copy-up 200 MB": lambda r: shutil.copyfile(r / "big.bin", r / "big.copy"),
}


def time_native(lower: Path, name: str, fn: Callable[[Path], object], reps: int) -> float:
    fn = NATIVE_EQUIVALENT.get(name, fn)
    out = []
    for _ in range(reps):
        scratch = Path(tempfile.mkdtemp(prefix="mb-native-", dir=lower.parent))
        # Writes must not touch the shared tree: mutating workloads run on a fresh copy (untimed).
        if name in ("1k creates + 100 appends", "copy-up 200 MB", "pytest sample project"):
            work = scratch / "w"
            work.mkdir()
            for entry in ("log.txt", "big.bin", "project"):
                src = lower / entry
                if src.is_dir():
                    shutil.copytree(src, work / entry)
                else:
                    shutil.copy2(src, work / entry)
        else:
            work = lower
        t = time.perf_counter()
        fn(work)
        out.append(time.perf_counter() - t)
        shutil.rmtree(scratch)
    return statistics.median(out) * 1000


@contextlib.contextmanager
def old_server(ov: SimpleNamespace, code: str) -> Iterator[Path]:
    """Another revision's FUSE server (its ``overlayfs`` package in ``code``) serving ``ov``."""
    root = Path(tempfile.mkdtemp(prefix="mb-old-mnt-", dir=Path(ov.metadir).parent))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "overlayfs.fuse",
            os.fspath(ov.lower),
            os.fspath(ov.upper),
            os.fspath(ov.metadir),
            os.fspath(root),
        ],
        stdout=subprocess.PIPE,
        cwd="/",
        env={**os.environ, "PYTHONPATH": code},
    )
    try:
        assert proc.stdout is not None
        if (line := proc.stdout.readline().strip()) != b"ready":
            raise BenchRunFailed(f"the FUSE server at {code} said {line!r}, not ready")
        yield root
    finally:
        subprocess.run(["fusermount3", "-u", os.fspath(root)], capture_output=True)
        proc.wait()


def _server_pids(root: Path) -> list[int]:
    """The processes serving the FUSE mount at ``root`` (those naming it on their command line)."""
    want = os.fsencode(root)
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                if want in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    out.append(int(pid))
    return out


def _cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


CPU: dict[tuple[str, str], list[float]] = {}  # (workload, backend) -> server CPU seconds per run


def time_mounted(lower: Path, backend: str, fn: Callable[[Path], None], reps: int, name: str = "") -> float:
    out = []
    for _ in range(reps):
        base = Path(tempfile.mkdtemp(prefix="mb-layers-", dir=lower.parent))
        ov = SimpleNamespace(lower=lower, upper=base / "upper", workdir=base / "work", metadir=base / "meta")
        for d in (ov.upper, ov.workdir, ov.metadir):
            d.mkdir()
        with old_server(ov, backend.partition("@")[2]) if "@" in backend else mounted(ov, backend) as root:
            pids = _server_pids(root)  # none for kernel overlayfs: the kernel serves it
            c0, t = _cpu_s(pids), time.perf_counter()
            fn(root)
            out.append(time.perf_counter() - t)
            CPU.setdefault((name, backend), []).append(_cpu_s(pids) - c0)
        shutil.rmtree(base)
    return statistics.median(out) * 1000


def time_sandboxed(lower: Path, backend: str, reps: int) -> float:
    """End to end as speculative Bash runs it: a bounded overlay, namespaces, mount, pytest, unmount."""
    out = []
    for _ in range(reps):
        ov = Overlay(lower, bound=SandboxLimits().layer_bound())
        try:
            t = time.perf_counter()
            r = run_sandboxed(ov, PYTEST, timeout=300, backend=backend)
            out.append(time.perf_counter() - t)
        finally:
            ov.discard()
        if r.exit_code != 0:
            raise RuntimeError(f"sandboxed pytest failed on {backend}: {r.stdout[-500:]} {r.stderr[-500:]}")
    return statistics.median(out) * 1000


def _label(backend: str, label: str) -> str:
    """``label``, and the transport our FUSE server took where ``backend`` chose it (``fuse``)."""
    if "@" in backend:
        return label
    b = get(backend)
    if isinstance(b, FuseBackend) and b.pinned is None and b.transport is not None:
        return f"{label} ({b.transport})"
    return label


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.mount_bench", description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--big-mb", type=int, default=200)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--baseline-rev", default=None, help="also time this revision's FUSE server")
    ap.add_argument(
        "--baseline-backend", default=FuseBackend.name, help="the backend whose server --baseline-rev times"
    )
    args = ap.parse_args(argv)
    backends = []
    for b in args.backends.split(","):
        why = unavailable_reason(b)
        if why is None:
            backends.append(b)
        else:
            print(f"# skipping {b}: {why}")
    top = Path(tempfile.mkdtemp(prefix="mount-bench-"))
    labels = list(backends)
    try:
        if args.baseline_rev and args.baseline_backend in backends:
            code = top / "old"
            code.mkdir()
            tar = subprocess.run(
                ["git", "-C", os.fspath(REPO), "archive", args.baseline_rev, "overlayfs"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", os.fspath(code)], input=tar, check=True)
            at = backends.index(args.baseline_backend) + 1
            backends.insert(at, f"{args.baseline_backend}@{code}")
            labels.insert(at, f"{args.baseline_backend} ({args.baseline_rev})")
        lower = top / "lower"
        lower.mkdir()
        build_tree(lower, args.files, args.big_mb)
        sh("cat big.bin > /dev/null; find tree -type f -print0 | xargs -0 cat > /dev/null", lower)  # warm
        rows: list[tuple[str, float, list[float]]] = []
        for name, fn in WORKLOADS.items():
            native = time_native(lower, name, fn, args.reps)
            per: dict[str, list[float]] = {b: [] for b in backends}
            for _ in range(args.reps):  # the backends interleaved round by round: a load spike hits all alike
                for b in backends:
                    per[b].append(time_mounted(lower, b, fn, 1, name))
            rows.append((name, native, [statistics.median(per[b]) for b in backends]))
            print(f"# {name}: done", file=sys.stderr)
        native_e2e = time_native(
            lower, "pytest sample project", WORKLOADS["pytest sample project"], args.reps
        )
        rows.append(
            (
                "pytest, sandboxed (ns + mount)",
                native_e2e,
                [time_sandboxed(lower, b, args.reps) if "@" not in b else float("nan") for b in backends],
            )
        )
    finally:
        shutil.rmtree(top, ignore_errors=True)
    labels = [_label(b, lb) for b, lb in zip(backends, labels, strict=True)]
    print(
        f"\nmedian of {args.reps}, ms (x native); first pass through a fresh mount; "
        f"{args.files} files, {args.big_mb} MB file; {os.cpu_count()} cores, kernel {os.uname().release}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    header = ["workload", "native", *labels]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, native, vals in rows:
        cells = [f"{v:.0f} ({v / native:.1f}x)" if v == v else "n/a" for v in vals]
        print(f"| {name} | {native:.0f} | " + " | ".join(cells) + " |")
    # The backends with a server process of their own (kernel overlayfs is mounted per command, no server).
    served = [
        (b, label)
        for b, label in zip(backends, labels, strict=True)
        if not get(b.partition("@")[0]).mounted_per_command
    ]
    print(
        "\nCPU time of the FUSE server process during each workload (user+sys, ms, median; steadier than "
        "seconds on a loaded machine)"
    )
    print("| workload | " + " | ".join(label for _, label in served) + " |")
    print("|---" * (len(served) + 1) + "|")
    for name, _, _ in rows:
        if any((name, b) in CPU for b, _ in served):
            print(
                f"| {name} | "
                + " | ".join(
                    f"{statistics.median(CPU[(name, b)]) * 1000:.0f}" if (name, b) in CPU else "n/a"
                    for b, _ in served
                )
                + " |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
