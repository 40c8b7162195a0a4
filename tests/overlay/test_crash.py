"""Crash safety of promotion: a promoting process killed at any point leaves, once the overlay is reopened,
every file entirely old or entirely new, and all of them on the same side."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from overlayfs import Overlay
from overlayfs.promote import JOURNAL, _apply, _plan, _prepare, _write_journal

N = 150
CHILD = """
import sys, time
from overlayfs import Overlay
ov = Overlay(sys.argv[1], sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
t = time.perf_counter()
result = ov.promote()
print(f"done {time.perf_counter() - t} {result.ok}", flush=True)
"""


def old(i: int) -> bytes:
    return f"old {i}\n".encode() * 3000


def new(i: int) -> bytes:
    return f"new {i}\n".encode() * 2000


def setup_overlay(base: Path) -> tuple[Path, Path]:
    """A real tree of N files plus one to delete; an upper layer rewriting all, deleting one, adding a dir."""
    lower = base / "lower"
    (lower / "sub").mkdir(parents=True)
    for i in range(N):
        (lower / f"sub/f{i:03}.txt").write_bytes(old(i))
    (lower / "doomed.txt").write_bytes(b"doomed")
    ov = Overlay(lower, base / "layers/upper")
    for i in range(N):
        ov.write_bytes(f"sub/f{i:03}.txt", new(i))
    ov.unlink("doomed.txt")
    ov.mkdir("fresh")
    ov.write_bytes("fresh/made.txt", b"made")
    return lower, ov.upper


def state_of(lower: Path) -> str:
    """'old' or 'new' for the whole tree; fails on any mixed, partial or stray file."""
    names = sorted(p.relative_to(lower).as_posix() for p in lower.rglob("*"))
    assert not [n for n in names if "ovl-tmp" in n], names
    sides = set()
    for i in range(N):
        data = (lower / f"sub/f{i:03}.txt").read_bytes()
        assert data in (old(i), new(i)), f"f{i:03}.txt is neither old nor new ({len(data)} bytes)"
        sides.add("old" if data == old(i) else "new")
    sides.add("old" if (lower / "doomed.txt").exists() else "new")
    sides.add("new" if (lower / "fresh/made.txt").exists() else "old")
    if "old" in sides:
        assert not (lower / "fresh").exists()
    assert len(sides) == 1, f"mixed promotion: {sides}"
    return sides.pop()


def run_child(lower: Path, upper: Path, kill_after: float | None) -> str:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with subprocess.Popen([sys.executable, "-c", CHILD, str(lower), str(upper)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "ready\n"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        if kill_after is None:
            return proc.stdout.readline()
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
        return ""


@pytest.mark.slow
def test_killed_promotion_is_rolled_back_or_forward(tmp_path: Path) -> None:
    lower, upper = setup_overlay(tmp_path / "calibrate")
    line = run_child(lower, upper, None)
    assert line.startswith("done") and line.split()[2] == "True", line
    assert state_of(lower) == "new"
    duration = float(line.split()[1])
    rng = random.Random(4)
    outcomes = []
    for k in range(10):
        lower, upper = setup_overlay(tmp_path / f"run{k}")
        run_child(lower, upper, rng.uniform(0, duration * 1.5))
        before = state_of(lower) if not (upper.parent / "meta" / JOURNAL).exists() else "journal"
        ov = Overlay(lower, upper)  # recovery happens here
        after = state_of(lower)
        outcomes.append((before, after))
        if after == "old":
            assert len(ov.changes()) == N + 3  # rolled back: the overlay still holds everything
            assert ov.promote().ok
            assert state_of(lower) == "new"
        else:
            assert ov.changes() == [] and list(upper.iterdir()) == []
        ov.discard()
    print("kill outcomes (state before reopen, after):", outcomes)


def test_crash_before_commit_point_rolls_back(tmp_path: Path) -> None:
    lower, upper = setup_overlay(tmp_path)
    ov = Overlay(lower, upper)
    j = _plan(str(lower), str(upper), ov.changes(), full=True, durable=False)
    _write_journal(ov.metadir, j)
    _prepare(str(lower), str(upper), j)  # every temp file staged, the new directory made; then "crash"
    assert (lower / "fresh").is_dir() and any("ovl-tmp" in p.name for p in (lower / "sub").iterdir())
    again = Overlay(lower, upper)
    assert state_of(lower) == "old"
    assert not (ov.metadir / JOURNAL).exists()
    assert len(again.changes()) == N + 3


def test_crash_after_commit_point_rolls_forward(tmp_path: Path) -> None:
    lower, upper = setup_overlay(tmp_path)
    ov = Overlay(lower, upper)
    j = _plan(str(lower), str(upper), ov.changes(), full=True, durable=False)
    _write_journal(ov.metadir, j)
    _prepare(str(lower), str(upper), j)
    _write_journal(ov.metadir, {**j, "state": "commit"})
    half = {**j, "puts": j["puts"][: N // 2], "rms": []}
    _apply(str(lower), half)  # half the files renamed into place; then "crash"
    assert (lower / "sub/f000.txt").read_bytes() == new(0)
    assert (lower / f"sub/f{N - 1:03}.txt").read_bytes() == old(N - 1)
    again = Overlay(lower, upper)
    assert state_of(lower) == "new"
    assert again.changes() == []
    assert again.read_bytes("sub/f000.txt") == new(0)
