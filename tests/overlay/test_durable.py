"""What a durable promotion makes durable, and when: recorded from the system calls it makes on real
filesystems, for the one-syncfs batches and for the per-file fsyncs, with the journal beside the project or
on another filesystem, and with a mount point inside the project.

The order that crash safety needs under power loss (docs/overlay.md, "Durability"):
1. the plan is in the journal and synced before the real tree changes at all;
2. every staged file's data and name, and every backup, is synced after it was written and before the
   commit record is synced;
3. the commit record is synced before the first rename in the real tree;
4. every directory a rename changed is synced after the last rename, before ``finish`` is journaled.

Then what the promotion replaced or removed is deleted off the promoting thread where it can be moved
aside (its blocks are freed later).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from overlayfs import Overlay, PromoteError, flush, stamps
from overlayfs.state import ENV, project_state, remove_tree, wait_disposals
from tests.overlay.conftest import make_tree, snapshot
from tests.overlay.fskit import tmpfs

TREE = {
    "a.txt": b"old a\n",
    "gone.txt": b"bye\n",
    "src/b.py": b"old b\n",
    "src/c.py": b"old c\n",
    "docs/d.md": b"old d\n",
    "sub/e.txt": b"old e\n",
}


@dataclass
class Call:
    kind: str  # create, write, mkdir, link, symlink, rename, fsync, fdatasync, syncfs
    path: str  # what it names (a syncfs: the directory it was called on)
    dev: int  # the device of what it names (its parent directory's for a rename or a create)


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _dev(path: str) -> int:
    try:
        return os.lstat(path).st_dev
    except FileNotFoundError:
        return os.lstat(os.path.dirname(path)).st_dev


@contextmanager
def traced() -> Iterator[list[Call]]:
    """Record the calls that change or sync a filesystem, in the order they return (fsyncs run on threads)."""
    calls: list[Call] = []
    lock = threading.Lock()
    saved: list[tuple[object, str, Callable[..., object]]] = []

    def wrap(
        owner: object, name: str, note: Callable[[tuple[object, ...], object], tuple[str, str] | None]
    ) -> None:
        real = getattr(owner, name)

        def call(*args: object, **kwargs: object) -> object:
            before = note(args, None) if name in ("fsync", "fdatasync", "syncfs") else None
            out = real(*args, **kwargs)
            what = before or note(args, out)
            if what is not None:
                with lock:
                    calls.append(Call(what[0], what[1], _dev(what[1])))
            return out

        saved.append((owner, name, real))
        setattr(owner, name, call)

    def on_open(args: tuple[object, ...], out: object) -> tuple[str, str] | None:
        flags = args[1] if len(args) > 1 else 0
        return ("create", os.fspath(args[0])) if isinstance(flags, int) and flags & os.O_CREAT else None  # type: ignore[arg-type]

    wrap(os, "open", on_open)
    wrap(os, "write", lambda a, _: ("write", _fd_path(a[0])))  # type: ignore[arg-type]
    wrap(os, "copy_file_range", lambda a, _: ("write", _fd_path(a[1])))  # type: ignore[arg-type]
    wrap(os, "mkdir", lambda a, _: ("mkdir", os.fspath(a[0])))  # type: ignore[arg-type]
    wrap(os, "link", lambda a, _: ("link", os.fspath(a[1])))  # type: ignore[arg-type]
    wrap(os, "symlink", lambda a, _: ("symlink", os.fspath(a[1])))  # type: ignore[arg-type]
    for owner, name in ((os, "rename"), (os, "replace"), (stamps, "renameat2")):
        wrap(owner, name, lambda a, _: ("rename", os.fspath(a[1])))  # type: ignore[arg-type]
    for owner, name in ((os, "fsync"), (os, "fdatasync"), (flush, "syncfs")):
        wrap(owner, name, lambda a, _, name=name: (name, _fd_path(a[0])))  # type: ignore[arg-type, misc]
    try:
        yield calls
    finally:
        for owner, name, real in reversed(saved):
            setattr(owner, name, real)


def _synced(calls: list[Call], after: int, before: int, path: str, dev: int) -> bool:
    """Whether ``path`` (a file or directory on device ``dev``) was made durable by a call between indexes
    ``after`` and ``before``: its own fsync, or a syncfs of its filesystem."""
    return any(
        (c.kind == "fsync" and c.path == path) or (c.kind == "syncfs" and c.dev == dev)
        for c in calls[after + 1 : before]
    )


def check_order(calls: list[Call], project: Path, journal: Path) -> None:
    root = str(project)
    inside = [
        i
        for i, c in enumerate(calls)
        if c.path.startswith(root + "/")
        and c.kind in ("create", "write", "mkdir", "link", "symlink", "rename")
    ]
    jsyncs = [i for i, c in enumerate(calls) if c.kind == "fdatasync" and c.path == str(journal)]
    assert len(jsyncs) == 2, "the plan and the commit record, each synced once"
    plan, commit = jsyncs
    assert inside and inside[0] > plan, "the real tree changed before the plan was durable"
    before = [i for i in inside if i < commit]
    renames = [i for i in inside if calls[i].kind == "rename"]
    assert renames and renames[0] > commit, "a rename in the real tree before the commit record was durable"
    # 2: each staged file's data (it was renamed away since: judged by the calls, not by what is there now)
    # and each staged name, backup link and new directory, after its last write, before the commit record
    files = {calls[i].path for i in before if calls[i].kind == "create"}
    assert files, "nothing was staged"
    last: dict[str, int] = {}
    for i in before:
        last[calls[i].path] = i
    for path, i in last.items():
        parent = os.path.dirname(path)
        if path in files:
            assert _synced(calls, i, commit, path, calls[i].dev), (
                f"the data of {path} not synced before commit"
            )
        assert _synced(calls, i, commit, parent, _dev(parent)), f"the name {path} not synced before commit"
    # 4: after the last rename, every directory a rename changed, before finish (the journal's next write)
    finish = next(
        i for i, c in enumerate(calls) if i > renames[-1] and c.kind == "write" and c.path == str(journal)
    )
    for d in {os.path.dirname(calls[i].path) for i in renames}:
        assert _synced(calls, renames[-1], finish, d, _dev(d)), f"{d} not synced after its renames"


def _change(ov: Overlay) -> None:
    ov.write_bytes("a.txt", b"new a\n")  # replaced: a backup
    ov.write_bytes("src/new.py", b"new\n" * 1000)  # new
    ov.write_bytes("src/b.py", b"new b\n")
    ov.symlink("a.txt", "link")
    ov.mkdir("newdir/deep", parents=True)  # new directories
    ov.write_bytes("newdir/deep/f.txt", b"deep\n")
    ov.unlink("gone.txt")
    ov.write_bytes("docs/d.md", b"new d\n")
    ov.write_bytes("sub/e.txt", b"new e\n")


def _promote(project: Path, monkeypatch: pytest.MonkeyPatch, *, syncfs: bool) -> tuple[list[Call], Path]:
    monkeypatch.setattr(flush, "SYNCFS", syncfs)
    monkeypatch.setattr(flush, "DIRTY_LIMIT", 1 << 62)  # other processes' writeback must not decide here
    ov = Overlay(project)
    _change(ov)
    with traced() as calls:
        assert ov.promote().ok
    return calls, project_state(project).journal


def _trusted(path: Path) -> bool:
    """Whether a batch on ``path``'s filesystem may be one syncfs here."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return flush._HAVE and flush.fs_magic(fd) in flush.TRUSTED
    finally:
        os.close(fd)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    make_tree(root, TREE)
    return root


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "fsyncs"])
def test_durable_promotion_syncs_in_the_order_crash_safety_needs(
    tree: Path, syncfs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, journal = _promote(tree, monkeypatch, syncfs=syncfs)
    check_order(calls, tree, journal)
    used = [c for c in calls if c.kind == "syncfs"]
    if syncfs and _trusted(tree):
        assert len(used) == 2, "one syncfs for the staged batch, one for the renames"
        assert not [c for c in calls if c.kind == "fsync" and c.path.startswith(f"{tree}")], (
            "no fsync in the project left beside the syncfs"
        )
    if not syncfs:
        assert not used
    assert (tree / "newdir/deep/f.txt").read_bytes() == b"deep\n" and not (tree / "gone.txt").exists()


def test_a_small_batch_is_fsyncd_on_the_promoting_thread(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One file: a file and a directory to sync, then a directory; fsyncs, which flush nobody else's data."""
    monkeypatch.setattr(flush, "DIRTY_LIMIT", 1 << 62)
    ov = Overlay(tree)
    ov.write_bytes("a.txt", b"new a\n")
    with traced() as calls:
        assert ov.promote().ok
    check_order(calls, tree, project_state(tree).journal)
    assert not [c for c in calls if c.kind == "syncfs"]
    assert {c.path for c in calls if c.kind == "fsync"} >= {str(tree)}


def test_the_journal_on_another_filesystem_keeps_its_own_syncs(
    tree: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shm = Path("/dev/shm")
    if not os.access(shm, os.W_OK) or os.stat(shm).st_dev == os.stat(tree).st_dev:
        pytest.skip("needs a writable /dev/shm on another filesystem than the project")
    state = Path(os.path.realpath(shm)) / f"speculate-durable-{os.getpid()}"
    monkeypatch.setenv(ENV, str(state))
    try:
        calls, journal = _promote(tree, monkeypatch, syncfs=True)
        assert os.stat(journal).st_dev != os.stat(tree).st_dev
        check_order(calls, tree, journal)  # the two fdatasyncs of the journal are still there
    finally:
        remove_tree(state)


@pytest.mark.privileged
def test_a_mount_point_inside_the_project_is_synced_by_its_own_fsyncs(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A syncfs of the project's filesystem does not cover a filesystem mounted inside it: its files and
    directories are fsync'd (here tmpfs, whose fsync does nothing, but the calls are what is checked)."""
    data = (tree / "sub/e.txt").read_bytes()
    (tree / "sub/e.txt").unlink()
    with tmpfs(tree / "sub" / "mnt", "size=4m") as mnt:
        (mnt / "e.txt").write_bytes(data)
        calls, journal = _promote_into(tree, monkeypatch, "sub/mnt/e.txt")
        check_order(calls, tree, journal)
        fsynced = {c.path for c in calls if c.kind == "fsync"}
        assert str(mnt) in fsynced
        assert (mnt / "e.txt").read_bytes() == b"new e on a mount\n"


def _promote_into(project: Path, monkeypatch: pytest.MonkeyPatch, rel: str) -> tuple[list[Call], Path]:
    monkeypatch.setattr(flush, "DIRTY_LIMIT", 1 << 62)
    ov = Overlay(project)
    ov.write_bytes(rel, b"new e on a mount\n")
    ov.write_bytes("a.txt", b"new a\n")
    with traced() as calls:
        assert ov.promote().ok
    return calls, project_state(project).journal


@pytest.mark.parametrize("step", [0, 1], ids=["staged batch", "renames"])
def test_a_failed_syncfs_rolls_the_promotion_back(
    tree: Path, step: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """syncfs reports a writeback error on the filesystem (EIO): before the commit point the promotion rolls
    back, after it undoes; the tree is the old one either way and the error names the project."""
    if not _trusted(tree):
        pytest.skip("no syncfs here (Linux < 5.8, or a filesystem whose syncfs is not trusted)")
    monkeypatch.setattr(flush, "DIRTY_LIMIT", 1 << 62)
    real, n = flush.syncfs, [0]

    def failing(fd: int) -> None:
        n[0] += 1
        if n[0] == step + 1:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(flush, "syncfs", failing)
    before = snapshot(tree)
    ov = Overlay(tree)
    _change(ov)
    with pytest.raises(PromoteError) as e:
        ov.promote()
    assert e.value.errno == 5 and str(tree) in str(e.value)
    assert snapshot(tree) == before


def _unlinked_in(tree: Path, ov: Overlay) -> list[str]:
    """Promote ``ov``'s changes; the backup and trash names the promoting thread unlinked in ``tree``."""
    gone: list[str] = []
    real = os.unlink

    def unlink(path: str, *args: object, **kwargs: object) -> None:
        if (
            threading.current_thread() is threading.main_thread()
            and str(path).startswith(f"{tree}/")
            and re.search(r"\.[br]\d+\.ovl-tmp$", str(path))
        ):
            gone.append(os.path.basename(path))
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    os.unlink = unlink  # type: ignore[assignment]
    try:
        assert ov.promote().ok
    finally:
        os.unlink = real
    return gone


def test_what_a_promotion_replaced_is_deleted_off_its_path(tree: Path) -> None:
    """The old versions of replaced and deleted files (backups, trash) are moved into the overlay's meta/tmp
    and deleted on a thread: freeing their blocks costs milliseconds each on a busy disk. The real tree holds
    none of our names afterwards, and meta/tmp is empty once the deletion is done."""
    ov = Overlay(tree)
    _change(ov)
    assert _unlinked_in(tree, ov) == []
    wait_disposals()
    assert not [p for p in tree.rglob("*") if p.name.endswith(".ovl-tmp")]
    assert os.listdir(ov.metadir / "tmp") == []
    assert (tree / "a.txt").read_bytes() == b"new a\n" and not (tree / "gone.txt").exists()


def test_with_the_state_dir_on_another_filesystem_they_are_deleted_in_place(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shm = Path("/dev/shm")
    if not os.access(shm, os.W_OK) or os.stat(shm).st_dev == os.stat(tree).st_dev:
        pytest.skip("needs a writable /dev/shm on another filesystem than the project")
    state = Path(os.path.realpath(shm)) / f"speculate-durable-{os.getpid()}"
    monkeypatch.setenv(ENV, str(state))
    try:
        ov = Overlay(tree)
        _change(ov)
        gone = _unlinked_in(tree, ov)
        assert {n.split(".")[1] for n in gone} == {"a", "b", "d", "e", "gone"}  # the replaced and the deleted
        assert not [p for p in tree.rglob("*") if p.name.endswith(".ovl-tmp")]
    finally:
        remove_tree(state)
