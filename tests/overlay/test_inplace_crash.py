"""A promotion that writes files in place (#34 item 3: other hard links, an xattr), stopped at every crash
point, then recovered: the real tree is byte for byte the old or the new one, the in-place files keep their
inode, their other links (inside and outside the project) show the same bytes, and their xattrs stay. An
edit by the user that stops the promotion after some files were written in place gets them their old bytes
back, in the same inode."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import pytest

from overlayfs import Overlay, recover_project
from overlayfs.state import pending, project_state
from tests.overlay.crashkit import Crash, crash_at, diff, snapshot, temps


def setup(base: Path) -> tuple[Path, Overlay]:
    lower, out = base / "lower", base / "out"
    lower.mkdir(parents=True)
    out.mkdir()
    (lower / "a.txt").write_bytes(b"alpha\n" * 1000)
    os.link(lower / "a.txt", lower / "a.link")
    os.link(lower / "a.txt", out / "a.out")
    (lower / "x.txt").write_bytes(b"x\n")
    os.setxattr(lower / "x.txt", "user.x", b"1")
    (lower / "plain.txt").write_bytes(b"plain\n")
    (lower / "gone.txt").write_bytes(b"gone\n")
    (lower / "z.txt").write_bytes(b"z\n")
    ov = Overlay(lower, base / "layers/upper")
    with ov.open("a.txt", "a") as f:  # in place: a hard link inside and one outside
        f.write("beta\n")
    with ov.open("x.txt", "r+b") as f:  # in place: an xattr (the view's copy-up carries it)
        f.write(b"X")
    ov.write_bytes("plain.txt", b"replaced\n")  # a replacement
    ov.write_bytes("new.txt", b"new\n")
    ov.unlink("gone.txt")
    ov.write_bytes("z.txt", b"z2\n")  # the last put (plan order is the change order: sorted)
    return lower, ov


def identity(base: Path, inodes: dict[str, int]) -> None:
    lower = base / "lower"
    for name, ino in inodes.items():
        assert (lower / name).stat().st_ino == ino, f"{name}: a new inode"
    a = (lower / "a.txt").read_bytes()
    assert (lower / "a.link").read_bytes() == a and (base / "out/a.out").read_bytes() == a
    assert os.getxattr(lower / "x.txt", "user.x") == b"1"


def inodes_of(lower: Path) -> dict[str, int]:
    return {n: (lower / n).stat().st_ino for n in ("a.txt", "x.txt")}


def test_in_place_files_are_written_in_place(tmp_path: Path, state_dir: Path) -> None:
    try:
        os.setxattr(tmp_path, "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs here: {e}")
    lower, ov = setup(tmp_path)
    inodes = inodes_of(lower)
    plain = (lower / "plain.txt").stat().st_ino
    assert ov.promote().ok
    identity(tmp_path, inodes)
    assert (lower / "a.txt").read_bytes() == b"alpha\n" * 1000 + b"beta\n"
    assert (lower / "plain.txt").stat().st_ino != plain  # a replacement stays one
    assert temps(lower) == []


@pytest.mark.slow
def test_every_crash_point_recovers_to_old_or_new_in_place(tmp_path: Path, state_dir: Path) -> None:
    try:
        os.setxattr(tmp_path, "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs here: {e}")
    lower, ov = setup(tmp_path / "calibrate")
    old = snapshot(lower)
    assert ov.promote().ok
    new = snapshot(lower)
    rng = random.Random(34)
    sides = []
    for k in itertools.count():
        assert k < 1000
        base = tmp_path / f"k{k}"
        lower, ov = setup(base)
        inodes = inodes_of(lower)
        try:
            with crash_at(k):
                ov.promote()
            assert snapshot(lower) == new
            identity(base, inodes)
            break
        except Crash:
            pass
        if k % 3 == 2:  # and a second crash, during the recovery itself
            with crash_at(rng.randrange(12)):
                try:
                    recover_project(lower)
                except Crash:
                    pass
        if k % 2:
            recover_project(lower)
        again = Overlay(lower, ov.upper)  # reopening recovers too
        now = snapshot(lower)
        assert now in (old, new), f"crash point {k}: neither old nor new: {diff(now, new)} / {diff(now, old)}"
        identity(base, inodes)
        assert temps(lower) == [], f"crash point {k}"
        assert not pending(project_state(lower))
        if now == old:
            assert again.promote().ok
            assert snapshot(lower) == new
            identity(base, inodes)
        sides.append("old" if now == old else "new")
    assert "old" in sides and "new" in sides and len(sides) > 20, sides


def test_a_user_edit_undoes_the_in_place_writes(tmp_path: Path, state_dir: Path) -> None:
    """The user edits z.txt (the last put) just before the promotion reaches it, after the in-place files
    were written: the promotion is a conflict on z.txt and the in-place files get their old bytes back."""
    try:
        os.setxattr(tmp_path, "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs here: {e}")
    undone = 0
    for k in range(200):
        base = tmp_path / f"k{k}"
        lower, ov = setup(base)
        old = snapshot(lower)
        inodes = inodes_of(lower)

        def edit(z: Path = lower / "z.txt") -> None:
            z.write_bytes(b"the user's\n")

        with crash_at(k, then=edit):
            result = ov.promote()
        if result.ok:  # the edit came after z.txt had landed (or never): the user's edit is on the new one
            break
        assert [c.path for c in result.conflicts] == ["z.txt"]
        now = snapshot(lower)
        assert diff(now, old) == ["z.txt"], diff(now, old)
        assert (lower / "z.txt").read_bytes() == b"the user's\n"
        identity(base, inodes)
        assert temps(lower) == [] and not pending(project_state(lower))
        undone += 1
    assert undone > 10


def test_abandon_never_keeps_a_half_written_file(tmp_path: Path, state_dir: Path) -> None:
    """``recover --abandon`` after the in-place writes began: each listed file is written whole from its
    staged copy (never kept half-way), counted new, and its backup is kept as the only copy of the old."""
    try:
        os.setxattr(tmp_path, "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs here: {e}")
    from overlayfs import abandon_project
    from overlayfs.journal import read

    calibrate, ov = setup(tmp_path / "calibrate")
    assert ov.promote().ok
    new_a = (calibrate / "a.txt").read_bytes()
    seen = 0
    for k in range(400):
        base = tmp_path / f"k{k}"
        lower, ov = setup(base)
        inodes = inodes_of(lower)
        try:
            with crash_at(k):
                ov.promote()
            break
        except Crash:
            pass
        j = read(project_state(lower).journal)
        if j is None or j["state"] != "commit" or not j.get("writing"):
            continue
        seen += 1
        line = abandon_project(lower).line()
        assert (lower / "a.txt").read_bytes() == new_a, f"crash point {k}: {line}"
        identity(base, inodes)
        assert "a.txt" in line.split("New: ")[1].split(". Old")[0], line
        kept = [t for t in temps(lower) if ".a.txt." in t]
        assert len(kept) == 1 and (Path(kept[0]).read_bytes() == b"alpha\n" * 1000), (kept, line)
        assert not pending(project_state(lower))
    assert seen > 3
