"""The upper layer's bound against fast writers: how far past it each one gets, per backend (figures only).

Run: ``.venv/bin/python -m bench.micro.bound_bench [--bytes-mib 64] [--inodes 5000] [--baseline-rev REV]``.
Each writer runs as speculative Bash runs (fresh overlay, sandbox) with the bound given, first makes 2,000
empty files (they slowed the scan of the old polling bound), then writes as fast as it can, swallowing
every error: ``fallocate`` 1 MiB at a time, ``dd`` 4 MiB at a time, a Python loop of 1 MiB writes, and an
inode filler (empty files, up to 10^6). Reported per backend and writer: the most the upper layer held,
as bytes and inodes over the bound (the larger of what the runner saw while the command ran and what the
layer holds after it), whether the run was flagged, and the command's wall time. ``--baseline-rev`` runs
the same writers with that revision's ``overlayfs`` (``git archive``) in a subprocess, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ("kernel", "fuse", "fuse-overlayfs")
MiB = 1 << 20
TINY = "mkdir tiny && cd tiny && seq 1 2000 | xargs touch && cd .. && "
WRITERS = {
    "fallocate": TINY + "i=0; while fallocate -l 1M fa$i 2>/dev/null; do i=$((i+1)); done; true",
    "dd": TINY + "i=0; while dd if=/dev/zero of=dd$i bs=4M count=1 2>/dev/null; do i=$((i+1)); done; true",
    "python": TINY + "python3 -c \"\nb = b'x' * (1 << 20)\nfor i in range(100000):\n    try:\n"
    "        open(f'w{i}', 'wb').write(b)\n    except OSError:\n        pass\n\"",
    "inodes": TINY + "python3 -c \"\nn = 0\ntry:\n    while n < 10**6:\n        open(f'i{n}', 'w').close()\n"
    '        n += 1\nexcept OSError:\n    pass\n"',
}


def measure(backend: str, writer: str, bound: int, inodes: int, lower: Path) -> dict[str, object]:
    """One writer on one backend: what the upper layer held at most, and what the run said."""
    from overlayfs import Overlay
    from overlayfs.sandbox import SandboxLimits, run_sandboxed

    kw = {"upper_bytes": bound}
    if "upper_inodes" in SandboxLimits.__dataclass_fields__:  # the old sandbox had no inode bound
        kw["upper_inodes"] = inodes
    ov = Overlay(lower)
    try:
        t = time.perf_counter()
        r = run_sandboxed(ov, WRITERS[writer], timeout=120, backend=backend, limits=SandboxLimits(**kw))
        wall = time.perf_counter() - t
        held = list(Path(ov.upper).rglob("*"))
        used, count = sum(p.lstat().st_blocks * 512 for p in held), len(held)
        peak_bytes, peak_inodes = getattr(r, "upper_peak", None) or (0, 0)
    finally:
        ov.discard()
    return {
        "over_bytes": max(used, peak_bytes) - bound,
        "over_inodes": max(count, peak_inodes) - inodes,
        "flagged": r.limit,
        "wall_s": round(wall, 2),
    }


def run(backends: list[str], bound: int, inodes: int) -> dict[str, dict[str, dict[str, Any]]]:
    top = Path(tempfile.mkdtemp(prefix="bound-bench-", dir="/var/tmp"))
    try:
        lower = top / "project"
        lower.mkdir()
        (lower / "README.md").write_text("# project\n")
        return {b: {w: measure(b, w, bound, inodes, lower) for w in WRITERS} for b in backends}
    finally:
        shutil.rmtree(top, ignore_errors=True)


def baseline(rev: str, backends: list[str], bound: int, inodes: int) -> dict[str, dict[str, dict[str, Any]]]:
    with tempfile.TemporaryDirectory(prefix="bound-bench-old-") as d:
        archive = subprocess.run(
            ["git", "-C", os.fspath(REPO), "archive", rev, "overlayfs"], capture_output=True
        )
        if archive.returncode != 0:
            print(
                f"# no baseline: git archive {rev} failed: {archive.stderr.decode().strip()}", file=sys.stderr
            )
            return {}
        subprocess.run(["tar", "-x", "-C", d], input=archive.stdout, check=True)
        code = (
            f"import json, sys; from bench.micro.bound_bench import run; "
            f"print(json.dumps(run({backends!r}, {bound}, {inodes})))"
        )
        extra = os.environ.get("PYTHONPATH")
        r = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": f"{d}:{REPO}" + (f":{extra}" if extra else "")},
            capture_output=True,
            text=True,
            cwd=d,
        )
        if r.returncode != 0:
            print(f"# baseline {rev} failed: {r.stderr.strip()[-500:]}", file=sys.stderr)
            return {}
        return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.bound_bench", description=__doc__)
    ap.add_argument("--bytes-mib", type=int, default=64)
    ap.add_argument("--inodes", type=int, default=5000)
    ap.add_argument(
        "--baseline-rev", default=None, help="also run the writers with this revision's overlayfs"
    )
    ap.add_argument("--backends", default=",".join(BACKENDS))
    args = ap.parse_args(argv)
    from overlayfs.mount import unavailable_reason

    backends = [b for b in args.backends.split(",") if unavailable_reason(b) is None]
    bound = args.bytes_mib * MiB
    new = run(backends, bound, args.inodes)
    old = baseline(args.baseline_rev, backends, bound, args.inodes) if args.baseline_rev else {}
    print(
        f"\nbound {args.bytes_mib} MiB, {args.inodes} inodes; uid {os.geteuid()}, {os.cpu_count()} cores, "
        f"kernel {os.uname().release}"
    )
    print(
        "| backend | writer | bytes over the bound | inodes over | flagged | wall s |"
        + (f" before ({args.baseline_rev}): bytes over | inodes over | flagged | wall s |" if old else "")
    )
    print("|---|---|---|---|---|---|" + ("---|---|---|---|" if old else ""))
    for b in backends:
        for w in WRITERS:
            n = new[b][w]
            row = (
                f"| {b} | {w} | {n['over_bytes'] / MiB:+.2f} MiB | {n['over_inodes']:+d} | {n['flagged'] or 'no'} "
                f"| {n['wall_s']} |"
            )
            if old:
                o = old.get(b, {}).get(w)
                row += (
                    f" {o['over_bytes'] / MiB:+.2f} MiB | {o['over_inodes']:+d} | {o['flagged'] or 'no'} | "
                    f"{o['wall_s']} |"
                    if o
                    else " n/a | | | |"
                )
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
