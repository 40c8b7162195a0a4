"""A file replacing a directory and a directory replacing a file (links too), promoted and stopped at every
crash point: after recovery the real tree is byte for byte the old or the new one, and never anything else.

The replay bug this guards against: after the commit point the old directory is removed and the new file
put in its place; a replay that removed "the directory" again deleted the promoted file."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from overlayfs import Overlay, recover_project
from overlayfs.journal import begin, mark, read
from overlayfs.promote import _plan
from overlayfs.state import ensure, pending, project_state
from overlayfs.steps import Steps
from tests.overlay.conftest import make_tree
from tests.overlay.crashkit import Crash, crash_at, diff, snapshot, temps

LOWER = {
    "keep.txt": b"keep\n",
    "d/a.txt": b"a\n",
    "d/sub/b.txt": b"b\n",
    "f": b"plain file\n",
    "x.txt": b"x\n",
    "link-dir/c.txt": b"c\n",
}


def file_over_dir(ov: Overlay) -> None:
    ov.rmtree("d")
    ov.write_bytes("d", b"now a file\n")


def dir_over_file(ov: Overlay) -> None:
    ov.unlink("f")
    ov.mkdir("f")
    ov.write_bytes("f/inner.txt", b"inner\n")
    ov.mkdir("f/deeper")
    ov.write_bytes("f/deeper/leaf.txt", b"leaf\n")


def link_over_dir(ov: Overlay) -> None:
    ov.rmtree("link-dir")
    ov.symlink("keep.txt", "link-dir")


def dir_over_link(ov: Overlay) -> None:
    ov.unlink("ln")
    ov.mkdir("ln")
    ov.write_bytes("ln/y.txt", b"y\n")


def swap(ov: Overlay) -> None:
    """Both directions at once, a directory renamed onto the file's old name, a read-only new directory."""
    ov.rename("d", "moved")
    ov.write_bytes("d", b"file where d was\n")
    ov.unlink("f")
    ov.rename("moved", "f")
    ov.mkdir("ro")
    ov.write_bytes("ro/inside.txt", b"inside\n")
    ov.chmod("ro", 0o555)
    ov.chmod("x.txt", 0o700)
    ov.write_bytes("keep.txt", b"kept, changed\n")


SCENARIOS: dict[str, Callable[[Overlay], None]] = {
    "file-over-dir": file_over_dir,
    "dir-over-file": dir_over_file,
    "link-over-dir": link_over_dir,
    "dir-over-link": dir_over_link,
    "swap": swap,
}


def setup(base: Path, change: Callable[[Overlay], None]) -> tuple[Path, Overlay]:
    lower = base / "lower"
    lower.mkdir(parents=True)
    make_tree(lower, LOWER)
    os.symlink("x.txt", lower / "ln")
    ov = Overlay(lower, base / "layers/upper")
    change(ov)
    return lower, ov


def old_and_new(base: Path, change: Callable[[Overlay], None]) -> tuple[dict[str, str], dict[str, str]]:
    lower, ov = setup(base, change)
    old = snapshot(lower)
    assert ov.promote().ok
    new = snapshot(lower)
    assert old != new and temps(lower) == []
    return old, new


def recover(lower: Path, upper: Path, how: int) -> Overlay:
    if how == 0:
        return Overlay(lower, upper)  # reopening the layer recovers
    recover_project(lower)
    return Overlay(lower, upper)


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_crash_point_recovers_to_old_or_new(tmp_path: Path, state_dir: Path, name: str) -> None:
    change = SCENARIOS[name]
    old, new = old_and_new(tmp_path / "calibrate", change)
    rng = random.Random(name)
    sides = []
    for k in itertools.count():  # until a promotion gets through all of its mutating calls
        assert k < 1000
        lower, ov = setup(tmp_path / f"k{k}", change)
        try:
            with crash_at(k):
                ov.promote()
            assert snapshot(lower) == new
            break
        except Crash:
            pass
        if k % 3 == 2:  # and a second crash, during the recovery itself
            with crash_at(rng.randrange(12)):
                try:
                    recover_project(lower)
                except Crash:
                    pass
        again = recover(lower, ov.upper, k % 2)
        now = snapshot(lower)
        assert now in (old, new), f"crash point {k}: neither old nor new: {diff(now, new)} / {diff(now, old)}"
        assert temps(lower) == [], f"crash point {k}"
        assert not pending(project_state(lower))
        if now == old:  # rolled back: the overlay still holds everything and promotes cleanly
            assert again.promote().ok
            assert snapshot(lower) == new
        else:
            assert again.changes() == []
        sides.append("old" if now == old else "new")
    assert "old" in sides and "new" in sides and len(sides) > 20, sides


@pytest.mark.parametrize("name", ["file-over-dir", "link-over-dir", "dir-over-file"])
def test_replaying_a_finished_apply_keeps_the_new_entry(tmp_path: Path, state_dir: Path, name: str) -> None:
    """The reported bug, step by step: the put has landed, the process dies before the journal goes."""
    lower, ov = setup(tmp_path, SCENARIOS[name])
    j = _plan(str(lower), str(ov.upper), ov.metadir, ov.changes(), full=True, durable=False)
    steps = Steps(j)
    measured = steps.prepare()
    ps = project_state(lower)
    ensure(ps)
    begin(ps.journal, j)
    mark(ps.journal, "commit", measured)
    steps.apply()  # every removal, mkdir and put done
    landed = snapshot(lower)
    steps.apply()  # a replay over its own completed effect changes nothing
    assert snapshot(lower) == landed
    steps.finish()  # the trash is gone too; then "killed" before the journal was removed
    landed = snapshot(lower)
    assert read(ps.journal) is not None
    rec = recover_project(lower)
    assert rec is not None and rec.action == "rolled forward"
    target = {"file-over-dir": "d", "link-over-dir": "link-dir", "dir-over-file": "f"}[name]
    assert snapshot(lower)[target] == landed[target]
    assert temps(lower) == [] and not pending(ps)
    if name == "file-over-dir":
        assert (lower / "d").read_bytes() == b"now a file\n"
    elif name == "link-over-dir":
        assert os.readlink(lower / "link-dir") == "keep.txt"
    else:
        assert (lower / "f/deeper/leaf.txt").read_bytes() == b"leaf\n"
