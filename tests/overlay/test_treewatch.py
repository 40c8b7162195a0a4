"""The watch of the real tree that stands for "the whole project was read" on the backends that record no
reads (overlayfs.treewatch): every kind of change under the root is seen and named, nothing outside it
is, a lost watch vouches for nothing, and a watch nobody needs goes away."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from overlayfs import treewatch

KINDS = ["fanotify", "inotify"]


class Holder:
    """What keeps a watch alive in these tests (the session's snapshot object does in use)."""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for rel in ("a.txt", "src/deep/er/b.py", "node_modules/p/lib/c.js", "empty/.keep"):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)
    (tmp_path / "outside.txt").write_text("x")
    return root


@pytest.fixture(params=KINDS)
def watch(
    request: pytest.FixtureRequest, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[treewatch.TreeWatch]:
    monkeypatch.setenv(treewatch.ENV, request.param)
    w = treewatch.start(tree)
    if w is None:
        if request.param == "fanotify" and os.geteuid() != 0:
            pytest.skip("fanotify filesystem marks need root")
        pytest.fail(f"no {request.param} watch could be made on {tree}")
    assert w.how == request.param
    h = Holder()
    w.hold(h)
    yield w
    del h
    w.close()


def _sed(p: Path) -> None:
    p.write_text(p.read_text().replace("a", "b"))


def _append(p: Path) -> None:
    with p.open("a") as f:
        f.write("x")


def _rmdir(p: Path) -> None:
    (p / ".keep").unlink()
    p.rmdir()


def _truncate(p: Path) -> None:
    os.truncate(p, 1)


CHANGES: dict[str, tuple[str, Callable[[Path], object]]] = {
    "write": ("a.txt", _sed),
    "append deep": ("src/deep/er/b.py", _append),
    "ignored tree": ("node_modules/p/lib/c.js", _sed),
    "truncate": ("a.txt", _truncate),
    "chmod": ("a.txt", lambda p: p.chmod(0o600)),
    "touch": ("a.txt", lambda p: os.utime(p, (1, 1))),
    "unlink": ("src/deep/er/b.py", lambda p: p.unlink()),
    "create": ("src/deep/new.py", lambda p: p.write_text("n")),
    "mkdir": ("src/newdir", lambda p: p.mkdir()),
    "rmdir": ("empty", lambda p: _rmdir(p)),
    "rename": ("a.txt", lambda p: p.rename(p.with_name("z.txt"))),
    "hard link": ("src/deep/er/b.py", lambda p: os.link(p, p.with_name("l.py"))),
    "symlink": ("src/link", lambda p: os.symlink("deep", p)),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_kind_of_change_is_seen_and_named(watch: treewatch.TreeWatch, tree: Path, change: str) -> None:
    w = watch
    assert w.seen().clean
    rel, do = CHANGES[change]
    do(tree / rel)
    seen = w.seen()
    assert seen.lost is None
    assert seen.paths, f"{change} of {rel} was not seen"
    top = rel.split("/")[0]
    assert any(p == rel or p.startswith(top) for p in seen.paths), seen.paths


def test_a_directory_moved_out_and_the_root_itself(watch: treewatch.TreeWatch, tree: Path) -> None:
    w = watch
    os.rename(tree / "src", tree.parent / "src-moved-out")
    assert "src" in w.seen().paths


def test_the_root_s_own_mode_is_a_change(watch: treewatch.TreeWatch, tree: Path) -> None:
    w = watch
    tree.chmod(0o700)
    assert w.seen().paths == (".",)


def test_changes_outside_the_root_and_reads_inside_are_not_changes(
    watch: treewatch.TreeWatch, tree: Path
) -> None:
    w = watch
    (tree.parent / "outside.txt").write_text("changed")
    (tree.parent / "sibling").mkdir()
    (tree / "a.txt").read_text()
    os.listdir(tree / "src")
    os.stat(tree / "node_modules/p/lib/c.js")
    assert w.seen().clean


def test_a_watch_this_process_does_not_have_vouches_for_nothing(watch: treewatch.TreeWatch) -> None:
    w = watch
    assert treewatch.seen(w.token).clean
    assert treewatch.seen("inotify-1-1-00000000").lost is not None  # another process's
    w.close()
    assert treewatch.seen(w.token).lost is not None


@pytest.mark.parametrize("kind", KINDS)
def test_a_watch_nobody_needs_goes_away(
    kind: str, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held by the session's object, then by the read record naming it; once both are gone (a full
    promotion empties the reads, a discard removes them) the watch closes itself: no thread, no descriptor
    and no kernel queue outlive the speculation."""
    monkeypatch.setenv(treewatch.ENV, kind)
    w = treewatch.start(tree)
    if w is None:
        pytest.skip(f"no {kind} watch here")
    h = Holder()
    w.hold(h)
    reads = tmp_path / "reads.jsonl"
    reads.write_text(f'{{"path": "//watch/{w.token}"}}\n')
    w.attach(reads)
    del h
    time.sleep(treewatch.LIVENESS_S * 2.5)
    assert treewatch.lookup(w.token) is w  # the record still names it
    reads.write_text("")
    deadline = time.monotonic() + 10
    while treewatch.lookup(w.token) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert treewatch.lookup(w.token) is None


def test_a_bad_mode_is_named(monkeypatch: pytest.MonkeyPatch, tree: Path) -> None:
    monkeypatch.setenv(treewatch.ENV, "fsevents")
    with pytest.raises(ValueError, match=treewatch.ENV):
        treewatch.start(tree)


def test_a_busy_directory_elsewhere_moved_in_is_a_change(watch: treewatch.TreeWatch, tree: Path) -> None:
    """A directory elsewhere whose events a fanotify watch has the kernel drop (it was busy) is still seen
    when it moves into the project: the move is an event in the project."""
    busy = tree.parent / "busy"
    busy.mkdir()
    for i in range(50):
        (busy / f"f{i % 5}").write_text(str(i))
    assert watch.seen().clean
    busy.rename(tree / "busy")
    assert "busy" in watch.seen().paths


@pytest.mark.privileged
@pytest.mark.parametrize("kind", KINDS)
def test_a_filesystem_mounted_inside_the_project_is_watched_too(
    kind: str, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fanotify mark covers one filesystem: another one mounted beneath the project gets its own."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    (tree / "mnt").mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", os.fspath(tree / "mnt")]).returncode != 0:
        pytest.skip("no tmpfs mount here")
    try:
        monkeypatch.setenv(treewatch.ENV, kind)
        w = treewatch.start(tree)
        assert w is not None and w.how == kind
        h = Holder()
        w.hold(h)
        (tree / "mnt" / "x").write_text("x")
        assert w.seen().paths == ("mnt/x",)
        w.close()
    finally:
        subprocess.run(["umount", os.fspath(tree / "mnt")], check=True)


def test_a_fanotify_watch_keeps_a_bounded_map_of_directories(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every directory with events anywhere on the filesystem is looked up once and kept by handle; a long
    session makes new ones each turn, so the map starts again at :data:`treewatch.MAX_DIRS` (#37: memory
    flat) and a change in the project is still seen after it did."""
    monkeypatch.setenv(treewatch.ENV, "fanotify")
    monkeypatch.setattr(treewatch, "MAX_DIRS", 8)
    w = treewatch.start(tree)
    if w is None:
        pytest.skip("fanotify filesystem marks need root")
    h = Holder()
    w.hold(h)
    try:
        for i in range(40):  # directories elsewhere with events, as each speculation's layers are
            d = tree.parent / "elsewhere" / f"d{i}"
            d.mkdir(parents=True)
            (d / "f").write_text("x")
        assert w.seen().clean
        assert 0 < len(w._dirs) <= 8, len(w._dirs)  # type: ignore[attr-defined]
        (tree / "src" / "deep" / "er" / "b.py").write_text("changed")
        assert w.seen().paths == ("src/deep/er/b.py",)
    finally:
        del h
        w.close()
