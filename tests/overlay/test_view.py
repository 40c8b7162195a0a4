"""The merged view: reads, writes, deletes, renames, listings; the real tree untouched until promotion."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

import speculate
from overlayfs import Change, Overlay, PathEscapeError, layer
from overlayfs.layer import is_opaque
from tests.overlay.conftest import TREE, snapshot


def test_creation_copies_nothing_and_satisfies_the_filesystem_protocol(project: Path, ov: Overlay) -> None:
    assert isinstance(ov, speculate.FileSystem)
    assert ov.root == ov.lower == project.resolve()
    assert list(ov.upper.iterdir()) == []
    assert ov.upper.parent == ov.workdir.parent == ov.metadir.parent
    assert ov.changes() == []
    assert ov.read_bytes("src/app.py") == TREE["src/app.py"]
    assert ov.read_text(project / "src/util.py") == TREE["src/util.py"].decode()


def test_writes_go_to_the_upper_layer_only(project: Path, ov: Overlay) -> None:
    before = snapshot(project)
    ov.write_text("src/app.py", "print('bye')\n")
    ov.write_bytes("new.txt", b"new")
    ov.mkdir("a/b", parents=True)
    ov.write_text("a/b/c.txt", "c")
    assert ov.read_text("src/app.py") == "print('bye')\n"
    assert ov.read_bytes("a/b/c.txt") == b"c"
    assert snapshot(project) == before
    assert (ov.upper / "src/app.py").read_bytes() == b"print('bye')\n"
    assert ov.changes() == [
        Change("a", "added", "dir"),
        Change("a/b", "added", "dir"),
        Change("a/b/c.txt", "added", "file"),
        Change("new.txt", "added", "file"),
        Change("src/app.py", "modified", "file"),
    ]


def test_listing_and_walk_show_the_merged_tree(ov: Overlay) -> None:
    ov.write_text("src/new.py", "n")
    ov.unlink("src/util.py")
    ov.rmtree("docs")
    assert ov.listdir("src") == ["app.py", "new.py", "pkg"]
    assert ov.listdir(".") == ["README.md", "bin", "src"]
    walked = list(ov.walk())
    assert walked == [
        (".", ["bin", "src"], ["README.md"]),
        ("bin", [], ["run.sh"]),
        ("src", ["pkg"], ["app.py", "new.py"]),
        ("src/pkg", [], ["__init__.py", "mod.py"]),
    ]
    assert list(ov.walk("src/pkg")) == [("src/pkg", [], ["__init__.py", "mod.py"])]


def test_walk_prunes_by_editing_dirnames(ov: Overlay) -> None:
    seen = []
    for dirpath, dirnames, _ in ov.walk():
        seen.append(dirpath)
        dirnames[:] = [d for d in dirnames if d != "src"]
    assert seen == [".", "bin", "docs"]


def test_deleted_entries_are_gone_everywhere(ov: Overlay) -> None:
    ov.unlink("README.md")
    assert not ov.exists("README.md")
    with pytest.raises(FileNotFoundError):
        ov.read_bytes("README.md")
    with pytest.raises(FileNotFoundError):
        ov.stat("README.md")
    ov.write_text("README.md", "back")
    assert ov.read_text("README.md") == "back"
    assert ov.changes() == [Change("README.md", "modified", "file")]


def test_whiteout_and_opaque_markers_in_the_upper_layer(ov: Overlay) -> None:
    ov.rmtree("src")
    st = os.lstat(ov.upper / "src")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0  # kernel overlayfs format: root may mknod
    ov.mkdir("src")
    assert is_opaque(ov.upper / "src")
    assert ov.listdir("src") == []  # the lower src/ stays hidden under the new directory
    ov.write_text("src/only.py", "x")
    assert ov.listdir("src") == ["only.py"]
    kinds = {(c.path, c.kind) for c in ov.changes()}
    assert ("src/app.py", "deleted") in kinds and ("src/pkg/mod.py", "deleted") in kinds
    assert ("src/only.py", "added") in kinds


def test_no_name_is_reserved_by_the_layer_format(project: Path, ov: Overlay) -> None:
    """``.wh.<name>`` and ``.wh..wh..opq`` are files like any other: they hide nothing and are promoted."""
    before = snapshot(project)
    ov.write_text(".wh.README.md", "mine")
    ov.write_text("src/.wh..wh..opq", "also mine")
    ov.mkdir(".wh.dir")
    assert ov.read_text("README.md") == TREE["README.md"].decode()
    assert ov.listdir(".") == [".wh.README.md", ".wh.dir", "README.md", "bin", "docs", "src"]
    assert ".wh..wh..opq" in ov.listdir("src") and "app.py" in ov.listdir("src")
    assert ov.changes() == [
        Change(".wh.README.md", "added", "file"),
        Change(".wh.dir", "added", "dir"),
        Change("src/.wh..wh..opq", "added", "file"),
    ]
    ov.unlink(".wh.README.md")  # removing the file leaves README.md alone
    assert ov.exists("README.md") and not ov.exists(".wh.README.md")
    ov.write_text(".wh.README.md", "mine")
    assert ov.promote().conflicts == []
    assert (project / ".wh.README.md").read_text() == "mine"
    assert (project / "src/.wh..wh..opq").read_text() == "also mine"
    assert (project / ".wh.dir").is_dir() and (project / "README.md").read_bytes() == TREE["README.md"]
    assert snapshot(project) != before


def test_a_whiteout_where_mknod_is_refused_is_a_marked_empty_file(project: Path, tmp_path: Path) -> None:
    upper = tmp_path / "layers/upper"
    upper.mkdir(parents=True)
    (upper / "README.md").touch()
    # The namespace this user's marks go to: trusted.* as root, else user.* (trusted.* is refused).
    os.setxattr(upper / "README.md", layer.WRITE_NAMESPACES[-1] + "whiteout", b"y")
    (upper / "empty").touch()  # an empty file without the mark is a file
    ov = Overlay(project, upper)
    try:
        assert not ov.exists("README.md") and ov.read_bytes("empty") == b""
        assert ov.changes() == [Change("README.md", "deleted", "file"), Change("empty", "added", "file")]
    finally:
        ov.discard()


def test_fuse_overlayfs_markers_are_adopted_and_a_users_lookalike_kept(project: Path, tmp_path: Path) -> None:
    """fuse-overlayfs marks an opaque directory with a ``.wh..wh..opq`` file and a ``.wh..opq`` whiteout
    beside the xattr; when its mount closes they are dropped. A lookalike file elsewhere is a user's."""
    upper = tmp_path / "layers/upper"
    (upper / "src").mkdir(parents=True)
    (upper / "docs").mkdir()
    (upper / "src/fresh.py").write_text("f")
    (upper / "src" / layer.OPAQUE_FILE).touch()
    os.mknod(upper / "src" / layer.FUSE_OVERLAYFS_OPQ, stat.S_IFCHR, os.makedev(0, 0))
    mark = layer.FUSE_OVERLAYFS_XATTR if os.geteuid() != 0 else layer.WRITE_NAMESPACES[0] + "opaque"
    os.setxattr(upper / "src", mark, b"y")
    (upper / "docs" / layer.OPAQUE_FILE).touch()  # no xattr, no whiteout beside it: a user's empty file
    layer.adopt_fuse_overlayfs(os.fspath(upper))
    ov = Overlay(project, upper)
    try:
        assert is_opaque(upper / "src") and ov.listdir("src") == ["fresh.py"]
        assert layer.OPAQUE_FILE in ov.listdir("docs") and "guide.txt" in ov.listdir("docs")
        assert Change("docs/.wh..wh..opq", "added", "file") in ov.changes()
        assert Change("src/app.py", "deleted", "file") in ov.changes()
    finally:
        ov.discard()


def test_errors_are_the_filesystem_ones_and_name_the_path(ov: Overlay) -> None:
    cases = [
        (lambda: ov.read_bytes("nope.txt"), FileNotFoundError),
        (lambda: ov.read_bytes("src"), IsADirectoryError),
        (lambda: ov.listdir("README.md"), NotADirectoryError),
        (lambda: ov.write_bytes("src", b""), IsADirectoryError),
        (lambda: ov.write_bytes("missing/x", b""), FileNotFoundError),
        (lambda: ov.write_bytes("README.md/x", b""), NotADirectoryError),
        (lambda: ov.mkdir("src"), FileExistsError),
        (lambda: ov.mkdir("x/y"), FileNotFoundError),
        (lambda: ov.unlink("src"), IsADirectoryError),
        (lambda: ov.rmdir("README.md"), NotADirectoryError),
        (lambda: ov.rename("nope", "x"), FileNotFoundError),
        (lambda: ov.rename("src/app.py", "docs"), IsADirectoryError),
        (lambda: ov.rename("src", "README.md"), NotADirectoryError),
    ]
    for call, exc in cases:
        with pytest.raises(exc) as info:
            call()
        assert info.value.filename is not None
    with pytest.raises(OSError) as info:
        ov.rmdir("src")
    assert info.value.errno == errno.ENOTEMPTY and info.value.filename == "src"
    with pytest.raises(OSError) as info:
        ov.rename("src", "src/pkg/inner")
    assert info.value.errno == errno.EINVAL
    assert ov.changes() == []


def test_mkdir_parents_and_exist_ok(ov: Overlay) -> None:
    ov.mkdir("x/y/z", parents=True)
    ov.mkdir("x/y", parents=True, exist_ok=True)
    assert ov.is_dir("x/y/z")
    with pytest.raises(FileExistsError):
        ov.mkdir("README.md", exist_ok=True)


def test_rename_file_and_directory(project: Path, ov: Overlay) -> None:
    ov.write_text("src/pkg/extra.py", "e")
    ov.rename("src/pkg", "lib")
    assert not ov.exists("src/pkg")
    assert ov.listdir("lib") == ["__init__.py", "extra.py", "mod.py"]
    assert ov.read_text("lib/mod.py") == "X = 1\n"
    ov.rename("README.md", "docs/README.md")
    assert ov.read_text("docs/README.md") == "# demo\n"
    ov.rename("docs/guide.txt", "docs/README.md")  # replaces, as os.rename does
    assert ov.read_text("docs/README.md") == "guide\n"
    assert ov.listdir("docs") == ["README.md"]
    ov.mkdir("empty")
    ov.rename("lib", "empty")  # onto an empty directory
    assert ov.listdir("empty") == ["__init__.py", "extra.py", "mod.py"]
    assert (project / "src/pkg/mod.py").exists() and not (project / "lib").exists()
    result = ov.promote()
    assert result.ok and not result.conflicts
    assert sorted(os.listdir(project)) == ["bin", "docs", "empty", "src"]
    assert (project / "empty/extra.py").read_text() == "e"
    assert (project / "docs/README.md").read_text() == "guide\n"


def test_stat_and_modes(project: Path, ov: Overlay) -> None:
    assert stat.S_IMODE(ov.stat("bin/run.sh").st_mode) == 0o755
    ov.write_text("bin/run.sh", "#!/bin/sh\necho changed\n")
    assert stat.S_IMODE(ov.stat("bin/run.sh").st_mode) == 0o755  # copy-up keeps the mode
    assert ov.stat("bin/run.sh").st_size == len("#!/bin/sh\necho changed\n")
    ov.chmod("README.md", 0o600)
    assert ov.read_text("README.md") == "# demo\n"
    assert stat.S_IMODE(ov.stat("README.md").st_mode) == 0o600
    assert stat.S_IMODE((project / "README.md").stat().st_mode) != 0o600
    assert ov.changes() == [Change("README.md", "modified", "file"), Change("bin/run.sh", "modified", "file")]
    assert "diff --git a/README.md b/README.md\nold mode 100644\nnew mode 100600\n" in ov.diff()
    assert ov.promote().ok
    assert stat.S_IMODE((project / "bin/run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((project / "README.md").stat().st_mode) == 0o600


def test_reopen_sees_the_same_view(project: Path, ov: Overlay) -> None:
    ov.write_text("src/app.py", "v2")
    ov.unlink("docs/guide.txt")
    again = Overlay(project, ov.upper)
    assert again.read_text("src/app.py") == "v2"
    assert not again.exists("docs/guide.txt")
    assert again.changes() == ov.changes()
    assert set(again.bases()) == {"src/app.py", "docs/guide.txt"}


def test_read_set_and_statistics(ov: Overlay) -> None:
    ov.read_bytes("src/app.py")
    ov.read_bytes("src/app.py")
    with ov.open("docs/guide.txt") as f:
        assert f.read() == "guide\n"
    ov.write_text("README.md", "x")
    ov.read_bytes("README.md")  # served from the upper layer: not a read of the real tree
    ov.chmod("src/util.py", 0o644)
    assert set(ov.reads()) == {"src/app.py", "docs/guide.txt"}
    assert ov.reads()["src/app.py"].sha256 is not None
    s = ov.statistics()
    assert (s.reads_recorded, s.copy_ups, s.bases_recorded) == (2, 1, 2)
    assert s.bytes_copied == len(TREE["src/util.py"])


def test_open_modes(project: Path, ov: Overlay) -> None:
    with ov.open("src/app.py", "a") as f:
        f.write("print('more')\n")
    assert ov.read_text("src/app.py") == "print('hello')\nprint('more')\n"
    with ov.open("bin/run.sh", "wb") as f:
        f.write(b"#!/bin/sh\n")
    assert stat.S_IMODE(ov.stat("bin/run.sh").st_mode) == 0o755
    with ov.open("fresh.txt", "x") as f:
        f.write("fresh")
    with pytest.raises(FileExistsError):
        ov.open("fresh.txt", "x")
    with pytest.raises(FileNotFoundError):
        ov.open("absent.txt", "r+")
    ov.unlink("README.md")
    with ov.open("README.md", "w") as f:  # over a whiteout
        f.write("recreated")
    assert ov.read_text("README.md") == "recreated"
    assert (project / "src/app.py").read_bytes() == TREE["src/app.py"]


def test_diff_is_a_unified_diff(ov: Overlay) -> None:
    ov.write_text("src/util.py", "def f():\n    return 2\n")
    ov.write_bytes("blob.bin", b"\x00\xff")
    ov.unlink("docs/guide.txt")
    d = ov.diff()
    assert "diff --git a/src/util.py b/src/util.py\n--- a/src/util.py\n+++ b/src/util.py" in d
    assert "-    return 1\n+    return 2" in d
    assert "deleted file mode 100644" in d and "-guide" in d
    assert "Binary files a/blob.bin and b/blob.bin differ" in d


def test_discard_removes_everything_and_leaves_the_tree(project: Path) -> None:
    before = snapshot(project)
    ov = Overlay(project)
    ov.write_text("src/app.py", "x")
    ov.rmtree("src/pkg")
    base = ov.upper.parent
    ov.discard()
    assert not base.exists()
    assert snapshot(project) == before
    with pytest.raises(ValueError, match="discarded"):
        ov.read_bytes("README.md")


def test_bad_construction_names_the_input(tmp_path: Path, project: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Overlay(tmp_path / "missing")
    with pytest.raises(NotADirectoryError):
        Overlay(project / "README.md")
    with pytest.raises(ValueError, match="must not contain each other"):
        Overlay(project, project / "layers/upper")


def test_escaping_paths_touch_nothing(project: Path, ov: Overlay) -> None:
    for bad in ("../outside", "/etc/passwd", "src/../../x", str(project.parent / "x")):
        with pytest.raises(PathEscapeError, match="outside the project root"):
            ov.write_bytes(bad, b"x")
        with pytest.raises(PathEscapeError):
            ov.read_bytes(bad)
        with pytest.raises(PathEscapeError):
            ov.exists(bad)
    assert list(ov.upper.iterdir()) == []
    assert not (project.parent / "outside").exists()


def test_cached_lookups_follow_the_real_tree_and_writes_made_elsewhere(project: Path, ov: Overlay) -> None:
    """Lookups of existing paths are cached (overlayfs.viewbase): what they serve is still read from disk,
    a real tree changed under them is walked again, and a write to the upper layer by someone else (a
    sandboxed command, a mount) counts once upper_changed() says so."""
    for _ in range(2):  # the second round is served from the cache
        assert ov.read_bytes("src/app.py") == TREE["src/app.py"] and ov.exists("docs/guide.txt")
        assert ov.stat("src/pkg/mod.py").st_size == len(TREE["src/pkg/mod.py"]) and ov.is_dir("src/pkg")
    (project / "src/app.py").write_text("print('changed by the user')\n")
    (project / "docs/guide.txt").unlink()
    (project / "src/pkg/mod.py").unlink()
    (project / "src/pkg/mod.py").mkdir()
    assert ov.read_text("src/app.py") == "print('changed by the user')\n"
    assert not ov.exists("docs/guide.txt") and not ov.is_file("docs/guide.txt")
    with pytest.raises(FileNotFoundError):
        ov.read_bytes("docs/guide.txt")
    assert ov.is_dir("src/pkg/mod.py") and stat.S_ISDIR(ov.stat("src/pkg/mod.py").st_mode)
    # Written behind the view's back (as a command through a mount would): a copy-up and a whiteout.
    assert ov.read_bytes("README.md") == TREE["README.md"] and ov.exists("bin/run.sh")
    (ov.upper / "README.md").write_bytes(b"# from a command\n")
    (ov.upper / "bin").mkdir()
    layer.make_whiteout(ov.upper / "bin", "run.sh")
    ov.upper_changed()
    assert ov.read_bytes("README.md") == b"# from a command\n" and not ov.exists("bin/run.sh")
    # The view's own writes drop what it cached, whichever path they take.
    ov.rmtree("src/pkg")
    assert not ov.exists("src/pkg/__init__.py")
