"""A promotion killed after its commit point (a mixed tree: some files new, some old, our *.ovl-tmp names
beside them) is never forgotten: the project moved, its disk unmounted and mounted again, the state dir
deleted, a recover run by another user, ``recover_all`` (what ``speculate bench`` runs first) in between.
Nothing is deleted, and each case ends in the whole new tree (after ``speculate recover`` at the path the
project has now) or in a message that names what was found, where the state lives and what to do (#34)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from overlayfs import Overlay, abandon_project, recover_all, recover_project
from overlayfs.journal import read
from overlayfs.state import ENV, project_state, state_root, wait_disposals
from tests.overlay.conftest import make_tree
from tests.overlay.crashkit import Crash, crash_at, snapshot, temps
from tests.overlay.fskit import as_nobody

REPO = str(Path(__file__).resolve().parents[2])
OLD = {f"f{i}.txt": f"old {i}\n".encode() for i in range(6)}
NEW = {**{k: v.replace(b"old", b"new") for k, v in OLD.items()}, "added.txt": b"added\n"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "speculate.cli", "recover", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PYTHONPATH": REPO},
    )


def new_count(root: Path) -> int:
    return sum((root / k).read_bytes() == v for k, v in NEW.items() if (root / k).exists())


def mixed(root: Path) -> None:
    """``root`` holds OLD; leave a promotion to NEW killed after its commit point with 2 to 5 files new."""
    make_tree(root, OLD)
    for k in range(300):
        ov = Overlay(root)
        for name, data in NEW.items():
            ov.write_bytes(name, data)
        try:
            with crash_at(k):
                ov.promote()
        except Crash:
            j = read(project_state(root).journal)
            if j is not None and j["state"] == "commit" and 2 <= new_count(root) <= 5:
                ov.discard()
                assert temps(root)
                return
        ov.discard()
        recover_project(root)
        for name in os.listdir(root):  # root may be a mount point
            os.unlink(root / name)
        make_tree(root, OLD)
    raise AssertionError("no crash point left a mixed tree")


def whole(root: Path) -> bool:
    return all((root / k).read_bytes() == v for k, v in NEW.items()) and temps(root) == []


def pending_anywhere() -> int:
    """State entries (of this user) holding a pending journal."""
    return sum(j.stat().st_size > 0 for j in (state_root() / "projects").glob("*/promote.journal"))


@contextmanager
def world_dir() -> Iterator[Path]:
    """A base dir another user can reach (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="spec-forget-"))
    os.chmod(d, 0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_as(user: str, body: Callable[[Path], None], tmp_path: Path) -> None:
    """Run ``body(base)`` as this user, or (root only) as uid 65534 with a state dir of its own."""
    if user == "self":
        body(tmp_path)
        return
    if os.geteuid() != 0:
        pytest.skip("needs root to become uid 65534")
    with world_dir() as base:

        def child() -> dict:  # type: ignore[type-arg]
            os.environ[ENV] = str(base / "state")
            body(base)
            return {"ok": True}

        out = as_nobody(child)
        assert out == {"ok": True}, out.get("unexpected")


@pytest.mark.parametrize("user", ["self", "nobody"])
def test_a_moved_project_is_found_and_finished_at_its_new_path(
    user: str, tmp_path: Path, state_dir: Path
) -> None:
    def body(base: Path) -> None:
        old, new = base / "proj", base / "renamed"
        mixed(old)
        before = snapshot(old)
        old.rename(new)
        ps = project_state(old)
        recs = recover_all()  # the bench's start: the missing directory is reported, its journal kept
        assert len(recs) == 1 and not recs[0].ok, recs
        line = recs[0].line()
        assert f"{old} is missing" in line and f"its state is in {ps.dir}" in line, line
        assert "speculate recover NEWPATH" in line, line
        assert read(ps.journal) is not None and snapshot(new) == before
        rec = recover_project(new)  # a session: found by device/inode, not finished behind the user's back
        assert rec is not None and not rec.ok and snapshot(new) == before
        assert "moved? this directory has the same device/inode" in rec.line(), rec.line()
        assert f"into {old} was found for {new}" in rec.line() and f"`speculate recover {new}`" in rec.line()
        rec = recover_project(new, scan=True, adopt=True)  # `speculate recover NEWPATH`
        assert rec is not None and rec.ok and rec.action == "rolled forward", rec
        assert f"it was started in {old}" in rec.line(), rec.line()
        assert whole(new) and pending_anywhere() == 0

    run_as(user, body, tmp_path)


def test_speculate_recover_at_the_new_path_says_what_it_found(tmp_path: Path, state_dir: Path) -> None:
    old, new = tmp_path / "proj", tmp_path / "moved"
    mixed(old)
    old.rename(new)
    r = cli(str(new))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(
        f"recovered: rolled forward an interrupted acceptance of {len(NEW)} changes in {new}"
    )
    assert f"(it was started in {old}; " in r.stdout
    assert whole(new)


@pytest.mark.parametrize("user", ["self", "nobody"])
def test_a_deleted_state_dir_is_said_over_a_mixed_tree(user: str, tmp_path: Path, state_dir: Path) -> None:
    def body(base: Path) -> None:
        root = base / "proj"
        mixed(root)
        before = snapshot(root)
        wait_disposals()  # the discarded overlays' background deletion
        shutil.rmtree(state_root())
        for rec in (recover_project(root, scan=True), recover_project(root, scan=True, adopt=True)):
            assert rec is not None and not rec.ok, rec  # the REPL's start, then `speculate recover`
            line = rec.line()
            assert f"{root} holds " in line and "temporary names of an interrupted acceptance" in line, line
            assert f"no state that could finish or undo it was found (looked in {state_root()})" in line
            assert "the state dir was deleted" in line and "part old, part new" in line, line
        rec = abandon_project(root)
        assert not rec.ok and "no state that could finish" in rec.line()
        assert snapshot(root) == before  # nothing deleted, nothing pretended

    run_as(user, body, tmp_path)


def test_the_cli_does_not_say_nothing_pending_over_leftovers(tmp_path: Path, state_dir: Path) -> None:
    root = tmp_path / "proj"
    mixed(root)
    wait_disposals()
    shutil.rmtree(state_dir)
    r = cli(str(root))
    assert r.returncode == 1 and "nothing pending" not in r.stdout, r.stdout + r.stderr
    assert r.stderr.startswith(f"speculate recover: not recovered: {root} holds "), r.stderr
    assert r.stderr.count("\n") == 1


def test_a_recover_by_another_user_names_the_owner(tmp_path: Path, state_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to become uid 65534")
    with world_dir() as base:
        root = base / "proj"
        mixed(root)
        os.chmod(root, 0o755)
        before = snapshot(root)

        def child() -> dict:  # type: ignore[type-arg]
            os.environ[ENV] = str(base / "nobody-state")
            rec = recover_project(root, scan=True, adopt=True)
            return {"line": None if rec is None else rec.line(), "recs": [r.line() for r in recover_all()]}

        out = as_nobody(child)
        line = out["line"]
        assert line is not None and line.startswith(f"not recovered: {root} holds "), out
        assert (
            "The names belong to uid 0 (root" in line and f"`speculate recover {root}` as that user" in line
        )
        assert snapshot(root) == before and read(project_state(root).journal) is not None
        rec = recover_project(root, scan=True, adopt=True)  # as the owner: finished
        assert rec is not None and rec.ok and rec.action == "rolled forward" and whole(root)


def test_abandon_lists_new_and_old_and_keeps_the_old_versions(tmp_path: Path, state_dir: Path) -> None:
    root = tmp_path / "proj"
    mixed(root)
    new = sorted(k for k, v in NEW.items() if (root / k).exists() and (root / k).read_bytes() == v)
    rec = abandon_project(root)
    line = rec.line()
    assert line.count("interrupted acceptance") == 1, line  # the repeated phrase is gone
    assert f"of {len(NEW)} changes into {root}; the real tree is kept as it is, part new, part old" in line
    assert f"New: {', '.join(new)}." in line, line
    for k in OLD:
        if k not in new:
            assert k in line.split("Old: ")[1], line
    kept = temps(root)
    assert kept and f"Kept {len(kept)} temporary name" in line, line
    backups = [p for p in kept if ".b" in Path(p).name]
    for b in backups:  # a backup kept is the old version of a file that is new now
        assert Path(b).read_bytes().startswith(b"old "), b
    assert {Path(b).read_bytes().replace(b"old", b"new") for b in backups} <= {
        (root / k).read_bytes() for k in new
    }
    assert recover_project(root, scan=True) is None  # abandoned on purpose: not reported again


@pytest.mark.privileged
def test_an_unmounted_disk_keeps_its_journal_until_it_is_back(tmp_path: Path, state_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to bind-mount the project")
    store, mnt = tmp_path / "store", tmp_path / "mnt"  # mnt: the project is the mount point itself
    disk, under = tmp_path / "disk", tmp_path / "mnt2"  # mnt2/proj: the project is a directory on it
    for d in (store, mnt, disk, under):
        d.mkdir()
    (disk / "proj").mkdir()

    def bind(src: Path, dst: Path) -> None:
        if subprocess.run(["mount", "--bind", str(src), str(dst)]).returncode:
            pytest.skip("cannot bind-mount here")

    bind(store, mnt)
    bind(disk, under)
    try:
        mixed(mnt)
        mixed(under / "proj")
        before = snapshot(mnt), snapshot(under / "proj")
        subprocess.run(["umount", str(mnt)], check=True)
        subprocess.run(["umount", str(under)], check=True)
        recs = {r.project: r.line() for r in recover_all()}  # the bench starts while the disks are away
        assert f"{under / 'proj'} is missing" in recs[under / "proj"], recs
        assert "belongs to another directory" in recs[mnt] and "a disk that is not mounted?" in recs[mnt]
        r = cli(str(mnt))  # an empty mount point: not the project, and nothing is dropped
        assert r.returncode == 1 and "nothing pending" not in r.stdout, r.stdout + r.stderr
        assert pending_anywhere() == 2, recover_all()
        recs2 = [r.line() for r in recover_all()]
        assert len(recs2) == 2 and all("is kept" in line for line in recs2), recs2
        bind(store, mnt)
        bind(disk, under)
        assert (snapshot(mnt), snapshot(under / "proj")) == before
        for root in (mnt, under / "proj"):
            r = cli(str(root))
            assert r.returncode == 0 and r.stdout.startswith("recovered: rolled forward"), r.stdout + r.stderr
            assert whole(root), root
        assert pending_anywhere() == 0
    finally:
        for d in (mnt, under):
            subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_the_repl_start_says_where_a_moved_projects_acceptance_is(tmp_path: Path, state_dir: Path) -> None:
    old, new = tmp_path / "proj", tmp_path / "moved"
    mixed(old)
    old.rename(new)
    before = snapshot(new)
    r = subprocess.run(
        [sys.executable, "-m", "speculate.cli", "repl", str(new), "--plain", "--no-spec"],
        input="",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PYTHONPATH": REPO, "SPECULATE_HISTORY": str(tmp_path / "h")},
    )
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"not recovered: a pending acceptance of {len(NEW)} changes into {old} was found")
    assert f"its state is in {project_state(old).dir}" in first and f"`speculate recover {new}`" in first
    assert snapshot(new) == before  # the REPL says it; `speculate recover` finishes it
    assert cli(str(new)).returncode == 0 and whole(new)
