"""The whole accepting process killed with SIGKILL at random moments: a child builds a speculation of more
than 1,000 changed paths (every kind of change) on a default overlay in the project's state dir, as the
engine does, then accepts it; the next start recovers from the project path alone, and the tree is then
byte for byte (modes and links included) the old or the new one, with none of our temp files left."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from overlayfs import recover_project
from overlayfs.journal import read
from overlayfs.state import ENV, pending, project_state, remove_tree
from tests.overlay.crashkit import diff, snapshot, temps
from tests.overlay.killkit import make_lower

ROOT = str(Path(__file__).resolve().parents[2])
TRIALS = 104


@contextmanager
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs when there is one: a SIGKILL leaves the same state on any filesystem, and in memory 104
    trials of 1,000+ files fit CI's time (ext4 on a shared VM is five times slower)."""
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="speculate-kill-", dir=shm)) if os.access(shm, os.W_OK) else tmp_path
    try:
        yield base
    finally:
        if base != tmp_path:
            remove_tree(base)


def start(lower: Path, *, bounded: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.overlay.killkit", str(lower), *(["--bounded"] if bounded else [])],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_for(proc: subprocess.Popen[str], line: str) -> float:
    assert proc.stdout is not None
    while (got := proc.stdout.readline()) != line + "\n":
        assert got, f"child ended before {line!r}"
    return time.perf_counter()


def copy(template: Path, dst: Path) -> Path:
    subprocess.run(["cp", "-a", str(template), str(dst)], check=True)
    return dst


@pytest.mark.slow
def test_whole_process_killed_while_accepting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    landed = _kill_while_accepting(tmp_path, monkeypatch, trials=TRIALS, bounded=False)
    assert landed["prepare"] >= TRIALS // 4, landed
    assert landed["commit"] + landed["finish"] + landed["finished"] >= TRIALS // 3, landed
    assert landed["commit"] >= 10, landed  # inside the apply window itself, not only after it


@pytest.mark.slow
def test_a_bounded_overlay_killed_while_accepting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's overlays keep their upper layer on a private tmpfs that dies with the process: a
    promotion killed after its commit point is rolled forward all the same (it needs only the staged
    files), and the dead process's upper layer is not looked for."""
    landed = _kill_while_accepting(tmp_path, monkeypatch, trials=12, bounded=True)
    # "finish": past the commit point, only temporary names left to clear; it rolls forward as "commit" does
    assert landed["prepare"] >= 3 and landed["commit"] + landed["finish"] + landed["finished"] >= 3, landed


def _kill_while_accepting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, trials: int, bounded: bool
) -> Counter[str]:
    with scratch(tmp_path) as base:
        monkeypatch.setenv(ENV, str(base / "state"))
        template = base / "template"
        make_lower(template)
        old = snapshot(template)
        lower = copy(template, base / "calibrate")
        with start(lower, bounded=bounded) as proc:  # uninterrupted: the new tree, and each phase's time
            t = {s: wait_for(proc, s) for s in ("built", "prepare", "commit", "done")}
        new = snapshot(lower)
        assert len(diff(old, new)) >= 1000
        windows = {"prepare": t["commit"] - t["prepare"], "commit": (t["done"] - t["commit"]) * 1.3}
        rng = random.Random(12)
        landed: Counter[str] = Counter()
        for i in range(trials):
            lower = copy(template, base / f"t{i}")
            phase = ("prepare", "commit")[i % 2]
            with start(lower, bounded=bounded) as proc:
                wait_for(proc, phase)
                time.sleep(rng.uniform(0, windows[phase]))
                proc.kill()
            j = read(project_state(lower).journal)
            where = j["state"] if j is not None else "finished" if snapshot(lower) == new else "unstarted"
            landed[where] += 1
            if i % 10 == 0:  # the command a user would run; the REPL, bench and Session call the same
                out = subprocess.run(
                    [sys.executable, "-m", "speculate.cli", "recover", str(lower)],
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": ROOT},
                    capture_output=True,
                    text=True,
                )
                assert out.returncode == 0, out.stderr
                assert out.stdout.startswith("recovered: "), out.stdout
            else:
                rec = recover_project(lower)
                assert rec is not None and rec.overlays_removed == 1  # the dead child's speculation
            now = snapshot(lower)
            assert now == (old if where == "prepare" else new), (
                i,
                where,
                diff(now, old)[:5],
                diff(now, new)[:5],
            )
            assert temps(lower) == [], (i, where)
            assert not pending(project_state(lower))
            assert list(project_state(lower).overlays.iterdir()) == [], (i, where)
            remove_tree(lower)
        print("where the kills landed:", dict(landed))
        return landed
