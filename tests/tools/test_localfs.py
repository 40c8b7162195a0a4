"""LocalFS on a real temporary tree: the FileSystem contract, atomic writes, and refusing to leave the root."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from overlayfs import PathEscapeError
from speculate import FileSystem
from speculate.fs import LocalFS


def test_is_a_filesystem_and_resolves_relative_and_absolute(project: Path) -> None:
    fs = LocalFS(project)
    assert isinstance(fs, FileSystem)
    assert fs.root == project
    assert fs.read_bytes("src/pkg/core.py") == fs.read_bytes(project / "src/pkg/core.py")
    assert fs.is_dir("src") and not fs.is_file("src")
    assert fs.is_file(f"{project}/README.md")
    assert not fs.exists("nope.txt")
    assert fs.listdir("src/pkg") == ["core.py", "util.py"]
    assert fs.stat("README.md").st_size == len("# Demo\nTODO: write docs\n")


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="missing"):
        LocalFS(tmp_path / "missing")


@pytest.mark.parametrize("path", ["../outside.txt", "src/../../outside.txt", "/etc/passwd"])
def test_lexical_escape_refused(project: Path, path: str) -> None:
    fs = LocalFS(project)
    with pytest.raises(PathEscapeError):
        fs.read_bytes(path)
    with pytest.raises(PathEscapeError):
        fs.write_bytes(path, b"x")


def test_symlink_out_of_root_refused_for_every_operation(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (project / "link_dir").symlink_to(outside)
    (project / "link_file").symlink_to(outside / "secret.txt")
    fs = LocalFS(project)
    for op in (
        lambda: fs.read_bytes("link_file"),
        lambda: fs.read_bytes("link_dir/secret.txt"),
        lambda: fs.write_bytes("link_dir/new.txt", b"x"),
        lambda: fs.write_bytes("link_file", b"x"),
        lambda: fs.mkdir("link_dir/sub"),
        lambda: fs.listdir("link_dir"),
        lambda: fs.exists("link_dir/secret.txt"),
    ):
        with pytest.raises(PathEscapeError, match="symlink"):
            op()
    assert (outside / "secret.txt").read_text() == "secret"
    assert not (outside / "new.txt").exists()
    # The link itself lives inside the root: removing it is allowed and leaves the target alone.
    fs.unlink("link_file")
    assert not (project / "link_file").exists() and (outside / "secret.txt").exists()


def test_symlink_inside_root_is_followed(project: Path) -> None:
    (project / "alias.py").symlink_to("src/pkg/core.py")
    fs = LocalFS(project)
    assert fs.read_bytes("alias.py").startswith(b"def add")
    fs.write_bytes("alias.py", b"changed\n")
    assert (project / "src/pkg/core.py").read_text() == "changed\n"
    assert (project / "alias.py").is_symlink()


def test_write_is_atomic_and_keeps_mode(project: Path) -> None:
    script = project / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o750)
    ino_before = script.stat().st_ino
    fs = LocalFS(project)
    fs.write_bytes("run.sh", b"#!/bin/sh\necho new\n")
    st = script.stat()
    assert stat.S_IMODE(st.st_mode) == 0o750
    assert st.st_ino != ino_before  # replaced by rename, not rewritten in place
    assert script.read_text().endswith("echo new\n")
    assert [p.name for p in project.iterdir() if p.name.endswith(".tmp")] == []


def test_new_file_mode_follows_umask(project: Path) -> None:
    fs = LocalFS(project)
    old = os.umask(0o027)
    try:
        fs.write_bytes("fresh.txt", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((project / "fresh.txt").stat().st_mode) == 0o640


def test_write_onto_directory_and_missing_parent_fail(project: Path) -> None:
    fs = LocalFS(project)
    with pytest.raises(IsADirectoryError):
        fs.write_bytes("src", b"x")
    with pytest.raises(FileNotFoundError):
        fs.write_bytes("no/such/dir/f.txt", b"x")


def test_walk_sorted_prunable_and_does_not_descend_links(project: Path, tmp_path: Path) -> None:
    (project / "b_dir").mkdir()
    (project / "b_dir" / "x.txt").write_text("x")
    (project / "a_link").symlink_to(tmp_path)
    fs = LocalFS(project)
    seen = []
    for dirpath, dirnames, filenames in fs.walk():
        if "b_dir" in dirnames:
            dirnames.remove("b_dir")
        seen.append((dirpath, list(dirnames), filenames))
    assert seen[0] == (".", ["a_link", "src"], ["README.md"])
    assert [d for d, _, _ in seen] == [".", "src", "src/pkg"]


def test_mkdir_unlink_rename(project: Path) -> None:
    fs = LocalFS(project)
    fs.mkdir("a/b/c", parents=True)
    fs.mkdir("a/b/c", parents=True)  # like mkdir -p
    with pytest.raises(FileExistsError):
        fs.mkdir("a")
    fs.write_bytes("a/b/c/f.txt", b"1")
    fs.rename("a/b/c/f.txt", "a/g.txt")
    assert (project / "a/g.txt").read_bytes() == b"1"
    fs.unlink("a/g.txt")
    assert not fs.exists("a/g.txt")
    with pytest.raises(FileNotFoundError):
        fs.unlink("a/g.txt")
