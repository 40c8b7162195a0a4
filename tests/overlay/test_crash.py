"""Crash safety of promotion: a promoting process killed at any point leaves, once the project is recovered,
every file entirely old or entirely new, and all of them on the same side, with none of our temp names."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from overlayfs import Overlay, recover_project
from overlayfs.journal import begin, mark
from overlayfs.promote import _plan
from overlayfs.state import ensure, pending, project_state
from overlayfs.steps import Steps
from tests.overlay.conftest import make_tree
from tests.overlay.crashkit import Crash, crash_at, diff, snapshot, temps

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
    assert temps(lower) == []
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
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(lower), str(upper)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
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
def test_killed_promotion_is_rolled_back_or_forward(tmp_path: Path, state_dir: Path) -> None:
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
        before = "journal" if pending(project_state(lower)) else state_of(lower)
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


def staged(lower: Path, upper: Path) -> tuple[Overlay, dict, Steps]:
    ov = Overlay(lower, upper)
    j = _plan(str(lower), str(upper), ov.metadir, ov.changes(), full=True, durable=False)
    ensure(project_state(lower))
    begin(project_state(lower).journal, j)
    steps = Steps(j)
    j["commit"] = steps.prepare()  # every temp file staged, the new directory made
    return ov, j, steps


def test_crash_before_commit_point_rolls_back(tmp_path: Path, state_dir: Path) -> None:
    lower, upper = setup_overlay(tmp_path)
    staged(lower, upper)  # then "crash"
    assert (lower / "fresh").is_dir() and any("ovl-tmp" in p.name for p in (lower / "sub").iterdir())
    again = Overlay(lower, upper)
    assert again.recovery is not None and again.recovery.action == "rolled back"
    assert state_of(lower) == "old"
    assert not pending(project_state(lower))
    assert len(again.changes()) == N + 3


def test_crash_after_commit_point_rolls_forward(tmp_path: Path, state_dir: Path) -> None:
    lower, upper = setup_overlay(tmp_path)
    _, j, _ = staged(lower, upper)
    mark(project_state(lower).journal, "commit", j["commit"])
    Steps({**j, "puts": j["puts"][: N // 2], "mkdirs": []}).apply()  # half the files in place; "crash"
    assert (lower / "sub/f000.txt").read_bytes() == new(0)
    assert (lower / f"sub/f{N - 1:03}.txt").read_bytes() == old(N - 1)
    again = Overlay(lower, upper)
    assert again.recovery is not None and again.recovery.action == "rolled forward"
    assert "rolled forward an interrupted acceptance of" in again.recovery.line()
    assert state_of(lower) == "new"
    assert again.changes() == []
    assert again.read_bytes("sub/f000.txt") == new(0)


# -- random changes, random crash points ----------------------------------------------------------------

LOWER = {"a/a": b"1", "a/b/c": b"22", "b": b"", "c/a/b": b"333", "c/c": b"1"}
NAMES = st.sampled_from(["a", "b", "c"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map("/".join)
OPS = st.one_of(
    st.tuples(st.just("write_bytes"), PATHS, st.sampled_from([b"", b"x", b"new\n"])),
    st.tuples(st.just("unlink"), PATHS),
    st.tuples(st.just("rmtree"), PATHS),
    st.tuples(st.just("mkdir"), PATHS),
    st.tuples(st.just("rename"), PATHS, PATHS),
    st.tuples(st.just("chmod"), PATHS, st.sampled_from([0o600, 0o755, 0o555])),
    st.tuples(st.just("symlink"), st.sampled_from(["b", "a/a", "c", "nowhere"]), PATHS),
)


def build(base: Path, ops: list[tuple]) -> tuple[Path, Overlay]:
    lower = base / "lower"
    lower.mkdir(parents=True)
    make_tree(lower, LOWER)
    os.symlink("c", lower / "c/ln")
    ensure(
        project_state(lower)
    )  # so that promote() makes the same calls in a fresh state dir as in a used one
    ov = Overlay(lower, base / "layers/upper")
    for op, *args in ops:
        try:
            getattr(ov, op)(*args)
        except OSError:
            pass  # the same error on both copies: the sequences stay equal
    return lower, ov


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=8), data=st.data())
def test_random_changes_crashed_anywhere_recover_to_old_or_new(
    tmp_path: Path, state_dir: Path, ops: list[tuple], data: st.DataObject
) -> None:
    base = tmp_path / uuid.uuid4().hex[:8]
    lower, ov = build(base / "twin", ops)
    old_tree = snapshot(lower)
    assume(ov.changes())
    with crash_at(None) as calls:
        assert ov.promote().ok
    new_tree = snapshot(lower)
    k = data.draw(st.integers(0, calls[0]), label="crash point")
    lower, ov = build(base / "crashed", ops)
    try:
        with crash_at(k):
            ov.promote()
    except Crash:
        if data.draw(st.booleans(), label="crash during recovery too"):
            try:
                with crash_at(data.draw(st.integers(0, 20), label="recovery crash point")):
                    recover_project(lower)
            except Crash:
                pass
    recover_project(lower)
    now = snapshot(lower)
    assert now in (old_tree, new_tree), (diff(now, old_tree), diff(now, new_tree))
    assert temps(lower) == [] and not pending(project_state(lower))
