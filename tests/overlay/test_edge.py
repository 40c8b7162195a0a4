"""Edge cases: path escapes, symlinks, long and non-UTF-8 names, empty and very large files, permissions."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tracemalloc
from pathlib import Path

import pytest

from overlayfs import Change, Overlay, PathEscapeError
from tests.overlay.conftest import snapshot

# -- escapes ------------------------------------------------------------------------------------------


def test_absolute_paths_inside_the_root_are_accepted_also_via_an_unresolved_alias(
    project: Path, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(project)
    ov = Overlay(alias)
    try:
        assert ov.root == project.resolve()
        assert ov.read_text(alias / "README.md") == "# demo\n"
        assert ov.read_text(project / "README.md") == "# demo\n"
        ov.write_text(str(alias / "x.txt"), "x")
        assert ov.listdir(str(project)) == ["README.md", "bin", "docs", "src", "x.txt"]
    finally:
        ov.discard()


def test_every_mutation_refuses_escaping_paths(project: Path, ov: Overlay) -> None:
    outside = project.parent / "outside.txt"
    outside.write_text("keep")
    before = snapshot(project.parent)
    calls = [
        lambda: ov.write_bytes("../outside.txt", b"x"),
        lambda: ov.unlink(str(outside)),
        lambda: ov.mkdir("../newdir"),
        lambda: ov.rename("README.md", "../moved.md"),
        lambda: ov.rename("../outside.txt", "inside.txt"),
        lambda: ov.rmtree(".."),
        lambda: ov.open("../outside.txt", "w"),
        lambda: ov.symlink("README.md", "../link"),
        lambda: ov.chmod("/etc/passwd", 0o777),
    ]
    for call in calls:
        with pytest.raises(PathEscapeError):
            call()
    assert snapshot(project.parent) == before
    assert list(ov.upper.iterdir()) == []


# -- symlinks -----------------------------------------------------------------------------------------


@pytest.fixture
def linked(project: Path) -> Path:
    (project / "src/alias.py").symlink_to("app.py")
    (project / "lib").symlink_to("src")
    (project / "src/pkg/up.md").symlink_to("../../README.md")
    (project / "etc").symlink_to("/etc")
    (project / "sneaky").symlink_to("../outside")
    (project / "loop1").symlink_to("loop2")
    (project / "loop2").symlink_to("loop1")
    (project / "dangling").symlink_to("made-by-write.txt")
    return project


def test_symlinks_inside_the_tree_resolve_in_the_merged_view(linked: Path, ov: Overlay) -> None:
    assert ov.read_text("src/alias.py") == "print('hello')\n"
    assert ov.read_text("lib/pkg/mod.py") == "X = 1\n"
    assert ov.read_text("src/pkg/up.md") == "# demo\n"
    assert ov.listdir("lib") == ov.listdir("src")
    ov.write_text("src/app.py", "v2")
    assert ov.read_text("src/alias.py") == "v2"  # the link resolves in the merged view, not the lower
    ov.write_text("lib/util.py", "through the link")  # writes the target
    assert ov.read_text("src/util.py") == "through the link"
    assert ov.is_symlink("lib") and ov.readlink("lib") == "src"
    assert ov.is_dir("lib") and not ov.is_file("lib")


def test_walk_lists_but_does_not_descend_symlinked_dirs(linked: Path, ov: Overlay) -> None:
    top = next(iter(ov.walk()))
    assert top[1] == ["bin", "docs", "lib", "src"]
    assert "etc" in top[2] and "sneaky" in top[2] and "loop1" in top[2]
    assert [d for d, _, _ in ov.walk()] == [".", "bin", "docs", "src", "src/pkg"]


def test_links_pointing_outside_are_refused_when_followed(linked: Path, ov: Overlay) -> None:
    with pytest.raises(PathEscapeError, match="outside the project root"):
        ov.read_bytes("etc/passwd")
    with pytest.raises(PathEscapeError):
        ov.write_bytes("sneaky", b"x")
    with pytest.raises(PathEscapeError):
        ov.listdir("etc")
    assert not ov.exists("etc/passwd") and not ov.exists("sneaky")
    assert ov.is_symlink("sneaky") and ov.readlink("sneaky") == "../outside"
    assert not (linked.parent / "outside").exists()
    ov.unlink("sneaky")  # the link itself may go
    assert not ov.is_symlink("sneaky")
    with pytest.raises(PathEscapeError):
        ov.symlink("/etc/passwd", "newlink")


def test_symlink_loops_and_dangling_links(linked: Path, ov: Overlay) -> None:
    with pytest.raises(OSError) as info:
        ov.read_bytes("loop1")
    assert info.value.errno == errno.ELOOP
    assert not ov.exists("loop1")
    assert not ov.exists("dangling") and ov.is_symlink("dangling")
    ov.write_text("dangling", "created through a dangling link")
    assert ov.read_text("made-by-write.txt") == "created through a dangling link"


def test_symlink_changes_promote(linked: Path, ov: Overlay) -> None:
    ov.symlink("docs/guide.txt", "guide-link")
    ov.unlink("src/alias.py")
    ov.symlink("util.py", "src/alias.py")
    ov.rename("lib", "library")
    assert ov.changes() == [
        Change("guide-link", "added", "symlink"),
        Change("lib", "deleted", "symlink"),
        Change("library", "added", "symlink"),
        Change("src/alias.py", "modified", "symlink"),
    ]
    assert ov.promote().ok
    assert os.readlink(linked / "guide-link") == "docs/guide.txt"
    assert os.readlink(linked / "src/alias.py") == "util.py"
    assert os.readlink(linked / "library") == "src" and not (linked / "lib").is_symlink()


def test_directory_replaced_a_symlink_promotes_without_writing_through_it(linked: Path, ov: Overlay) -> None:
    (linked.parent / "outside").mkdir()
    ov.unlink("sneaky")
    ov.mkdir("sneaky")
    ov.write_text("sneaky/inside.txt", "i")
    assert ov.promote().ok
    assert (linked / "sneaky").is_dir() and not (linked / "sneaky").is_symlink()
    assert (linked / "sneaky/inside.txt").read_text() == "i"
    assert list((linked.parent / "outside").iterdir()) == []


# -- names --------------------------------------------------------------------------------------------


def test_long_names(project: Path, ov: Overlay) -> None:
    name = "n" * 255
    (project / name).write_text("lower")
    ov.write_text(f"docs/{name}", "new")
    ov.unlink(name)  # a whiteout for a 255-byte name still fits (0/0 device of the same name)
    assert name not in ov.listdir(".")
    assert ov.read_text(f"docs/{name}") == "new"
    with pytest.raises(OSError) as info:
        ov.write_text("m" * 256, "x")
    assert info.value.errno == errno.ENAMETOOLONG
    assert ov.promote().ok
    assert not (project / name).exists() and (project / "docs" / name).read_text() == "new"


def test_non_utf8_names(project: Path, ov: Overlay) -> None:
    raw = os.fsencode(project) + b"/caf\xe9.txt"
    fd = os.open(raw, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"latin-1 name")
    os.close(fd)
    name = os.fsdecode(b"caf\xe9.txt")
    assert name in ov.listdir(".")
    assert ov.read_bytes(name) == b"latin-1 name"
    ov.write_bytes(b"new\xff.bin", b"bytes path")
    ov.rename(name, os.fsdecode(b"renamed\xfe.txt"))
    assert set(ov.reads()) == {".", name}  # the listed root directory and the file read
    assert os.fsdecode(b"new\xff.bin") in {c.path for c in ov.changes()}
    assert "new\udcff.bin" in ov.diff()
    again = Overlay(project, ov.upper)  # the JSONL records survive a reopen
    assert set(again.bases()) == set(ov.bases())
    assert again.promote().ok
    names = set(os.listdir(os.fsencode(project)))
    assert {b"new\xff.bin", b"renamed\xfe.txt"} <= names and b"caf\xe9.txt" not in names


def test_empty_files(project: Path, ov: Overlay) -> None:
    assert ov.read_bytes("src/pkg/__init__.py") == b""
    ov.write_bytes("empty.txt", b"")
    ov.write_bytes("README.md", b"")
    ov.write_bytes("src/pkg/__init__.py", b"")  # same (empty) content: no change
    assert ov.changes() == [Change("README.md", "modified"), Change("empty.txt", "added")]
    assert ov.promote().ok
    assert (project / "empty.txt").read_bytes() == b"" and (project / "README.md").read_bytes() == b""


# -- large files --------------------------------------------------------------------------------------

MB = 1 << 20


def _chunk(i: int) -> bytes:
    return hashlib.sha256(i.to_bytes(4, "big")).digest() * (MB // 32)


def _digest_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(MB):
            h.update(block)
    return h.hexdigest()


@pytest.mark.slow
def test_large_files_are_streamed_not_read_into_memory(project: Path, ov: Overlay) -> None:
    big_lower = project / "big.img"
    with open(big_lower, "wb") as f:
        f.truncate(120 * MB)
        f.write(b"head")
    expected = hashlib.sha256()
    tracemalloc.start()
    try:
        with ov.open("new.bin", "wb") as f:
            for i in range(100):
                f.write(_chunk(i))
                expected.update(_chunk(i))
        got = hashlib.sha256()
        with ov.open("new.bin", "rb") as f:
            while block := f.read(MB):
                got.update(block)
        assert got.hexdigest() == expected.hexdigest()
        with ov.open("big.img", "r+b") as f:  # copy-up of 120 MB, then a one-byte edit
            f.seek(60 * MB)
            f.write(b"X")
        changes = ov.changes()
        assert "larger than" in ov.diff()
        assert ov.promote().ok
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MB, f"peak Python allocation {peak / MB:.1f} MiB"
    assert changes == [Change("big.img", "modified"), Change("new.bin", "added")]
    assert ov.statistics().bytes_copied == 120 * MB
    assert _digest_file(project / "new.bin") == expected.hexdigest()
    with open(big_lower, "rb") as f:
        assert f.read(4) == b"head"
        f.seek(60 * MB)
        assert f.read(1) == b"X"
    assert big_lower.stat().st_size == 120 * MB


# -- permissions --------------------------------------------------------------------------------------


def test_modes_survive_copy_up_and_promotion(project: Path, ov: Overlay) -> None:
    (project / "ro.txt").write_text("read only")
    (project / "ro.txt").chmod(0o444)
    (project / "private").mkdir(mode=0o700)
    (project / "private/key").write_text("k")
    ov.write_text("ro.txt", "still read only")
    ov.write_text("private/new", "n")
    ov.write_text("fresh.txt", "f")
    assert stat.S_IMODE(ov.stat("ro.txt").st_mode) == 0o444
    assert stat.S_IMODE(os.stat(ov.upper / "private").st_mode) == 0o700  # copied-up directory keeps its mode
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(ov.stat("fresh.txt").st_mode) == 0o666 & ~umask
    ov.mkdir("newdir")
    ov.chmod("newdir", 0o750)
    assert ov.promote().ok
    assert stat.S_IMODE((project / "ro.txt").stat().st_mode) == 0o444
    assert (project / "ro.txt").read_text() == "still read only"
    assert stat.S_IMODE((project / "private").stat().st_mode) == 0o700
    assert stat.S_IMODE((project / "newdir").stat().st_mode) == 0o750


@pytest.mark.skipif(os.geteuid() == 0, reason="root bypasses file permission checks")
def test_unreadable_lower_file_raises_permission_error(project: Path, ov: Overlay) -> None:
    (project / "secret").write_text("s")
    (project / "secret").chmod(0)
    with pytest.raises(PermissionError):
        ov.read_bytes("secret")
