"""One conformance suite over every backend: same operations, same merged view, same changes; lower intact."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from overlayfs import backends
from overlayfs.backends import BACKENDS, MOUNTABLE, MountBackend
from overlayfs.bounded import LayerBound
from overlayfs.mount import MountError, mounted, open_mount
from overlayfs.mountpoints import is_mounted
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require, require_host_mount, tree_digest

Op = tuple[str, ...]
# A speculation's worth of edits: new, modified, deleted, moved (file and lower directory), replaced dir.
OPS: list[Op] = [
    ("mkdir", "notes"),
    ("write", "notes/new.txt", "fresh\n"),
    ("append", "src/shop/utils.py", "\n# touched\n"),
    ("unlink", "README.md"),
    ("mkdir", "docs"),
    ("rename", "CHANGELOG.md", "docs/CHANGES.md"),
    ("rmtree", "data"),
    ("mkdir", "data"),
    ("write", "data/fresh.json", "{}\n"),
    ("rename", "tests", "checks"),
    ("symlink", "notes/new.txt", "latest"),
    ("chmod", "src/shop/cli.py", "0o755"),
    ("write", "src/shop/pager.py", "replaced\n"),
]


def apply_native(root: Path, op: Op) -> None:
    kind, a, *rest = op
    p = root / a
    if kind == "mkdir":
        p.mkdir()
    elif kind == "write":
        p.write_text(rest[0])
    elif kind == "append":
        with p.open("a") as f:
            f.write(rest[0])
    elif kind == "unlink":
        p.unlink()
    elif kind == "rename":
        shutil.move(p, root / rest[0])  # a lower directory gives EXDEV on kernel overlayfs: mv copies
    elif kind == "rmtree":
        shutil.rmtree(p)
    elif kind == "symlink":
        os.symlink(os.path.relpath(root / a, (root / rest[0]).parent), root / rest[0])
    elif kind == "chmod":
        p.chmod(int(rest[0], 8))


def apply_pure(ov: Overlay, op: Op) -> None:
    kind, a, *rest = op
    if kind == "mkdir":
        ov.mkdir(a)
    elif kind == "write":
        ov.write_text(a, rest[0])
    elif kind == "append":
        ov.write_text(a, ov.read_text(a) + rest[0])
    elif kind == "unlink":
        ov.unlink(a)
    elif kind == "rename":
        ov.rename(a, rest[0])
    elif kind == "rmtree":
        ov.rmtree(a)
    elif kind == "symlink":
        ov.symlink(os.path.relpath(a, os.path.dirname(rest[0]) or "."), rest[0])
    elif kind == "chmod":
        ov.chmod(a, int(rest[0], 8))


Snapshot = dict[str, tuple[object, ...]]


def snap_native(root: Path) -> Snapshot:
    out: Snapshot = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            if rel == ".git" or rel.startswith(".git/"):
                continue
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), p.read_bytes())
    return out


def snap_pure(ov: Overlay) -> Snapshot:
    out: Snapshot = {}
    stack = ["."]
    while stack:
        d = stack.pop()
        for name in ov.listdir(d):
            rel = name if d == "." else f"{d}/{name}"
            if rel == ".git":
                continue
            st = ov.lstat(rel)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", ov.readlink(rel))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
                stack.append(rel)
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), ov.read_bytes(rel))
    return out


def changes(ov: Overlay) -> set[tuple[str, str]]:
    return {(c.path, c.kind) for c in ov.changes() if not c.path.startswith(".git")}


@pytest.mark.parametrize("backend", backend_params(*BACKENDS))
def test_every_registered_backend_mounts_and_unmounts_through_one_interface(
    backend: str, project: Path, overlay: Overlay
) -> None:
    """The registry is the one source of backends: each one registered answers the same questions
    (availability, whether it mounts) and goes through the same open and close, which leaves nothing
    mounted and the write it took in the upper layer."""
    kind = backends.get(backend)
    assert isinstance(kind, MountBackend) and kind.name == backend and kind.enforces
    require(backend)
    assert backend in backends.available_backends()
    if not kind.mountable:
        with pytest.raises(MountError, match="no mountable backend"):
            open_mount(overlay, backend)
        return
    if kind.host_mount_needs_root and os.geteuid() != 0:
        pytest.skip(f"{backend} mounts on the host only as root")
    m = open_mount(overlay, backend)
    try:
        assert m.backend == backend and is_mounted(m.root)
        (m.root / "through-the-mount.txt").write_text("written\n")
    finally:
        m.close()
    assert not is_mounted(m.root) and not m.root.exists()
    assert (overlay.upper / "through-the-mount.txt").read_text() == "written\n"
    assert not (project / "through-the-mount.txt").exists()


def test_unknown_backend_is_named() -> None:
    with pytest.raises(ValueError, match="unknown backend 'zfs'; expected one of pure, fuse"):
        backends.unavailable_reason("zfs")


BOUNDED = pytest.mark.parametrize("bounded", [False, True], ids=["disk", "bounded"])


@BOUNDED
@pytest.mark.parametrize("backend", backend_params(*BACKENDS))
def test_same_operations_same_results(
    backend: str, bounded: bool, project: Path, overlay: Overlay, tmp_path: Path
) -> None:
    """On the state dir's filesystem and on a bounded layer (a private tmpfs, what the sandbox uses)."""
    require_host_mount(backend)
    if bounded:
        overlay = Overlay(project, bound=LayerBound())
    reference = tmp_path / "reference"
    shutil.copytree(project, reference, symlinks=True)
    for op in OPS:
        apply_native(reference, op)
    before = tree_digest(project)

    if not backends.get(backend).mountable:
        for op in OPS:
            apply_pure(overlay, op)
        view = snap_pure(overlay)
    else:
        with mounted(overlay, backend) as root:
            for op in OPS:
                apply_native(root, op)
            view = snap_native(root)

    assert view == snap_native(reference)
    assert tree_digest(project) == before, "the lower tree changed"
    # The layer format is shared: a fresh pure view of the same upper layer sees the same tree.
    reopened = Overlay(project, upper=overlay.upper)
    assert snap_pure(reopened) == view
    got = changes(reopened)
    assert {
        ("notes/new.txt", "added"),
        ("README.md", "deleted"),
        ("src/shop/utils.py", "modified"),
        ("docs/CHANGES.md", "added"),
        ("CHANGELOG.md", "deleted"),
        ("data/catalog.json", "deleted"),
        ("latest", "added"),
    } <= got
    # Same changes as the pure view computes for the same operations.
    pure = Overlay(project, upper=tmp_path / "pure-layers" / "upper")
    for op in OPS:
        apply_pure(pure, op)
    assert got == changes(pure)


PosixCheck = Callable[[Path], object]


def _posix_observations(root: Path) -> dict[str, object]:
    """POSIX details build tools rely on, as observations comparable between native and mounted trees."""
    obs: dict[str, object] = {}
    src = root / "src" / "shop"
    # An open file that is unlinked stays readable and fstat-able through its descriptor.
    fd = os.open(src / "cart.py", os.O_RDONLY)
    os.unlink(src / "cart.py")
    obs["unlinked_read"] = os.pread(fd, 10, 0)
    obs["unlinked_size"] = os.fstat(fd).st_size
    os.close(fd)
    obs["unlinked_gone"] = (src / "cart.py").exists()
    # Rename over an existing file; rename a file within the tree.
    os.rename(src / "pricing.py", src / "utils.py")
    obs["renamed_over"] = (src / "utils.py").read_bytes()[:30]
    # Hard link of a lower file: both names share data.
    os.link(src / "pager.py", root / "pager-link.py")
    with open(root / "pager-link.py", "ab") as f:
        f.write(b"# via link\n")
    obs["hardlink"] = (
        (src / "pager.py").read_bytes().endswith(b"# via link\n"),
        os.stat(src / "pager.py").st_nlink,
    )
    # truncate, chmod, utime.
    os.truncate(src / "catalog.py", 5)
    os.chmod(src / "catalog.py", 0o640)
    os.utime(src / "catalog.py", ns=(1_000_000_000, 2_000_000_000))
    st = os.stat(src / "catalog.py")
    obs["setattr"] = (st.st_size, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    # O_DIRECT opens work (the backing file is opened without it).
    fd = os.open(src / "inventory.py", os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    os.close(fd)
    # Many entries: a listing neither repeats nor skips across readdir batches.
    big = root / "many"
    big.mkdir()
    for i in range(600):
        (big / f"file-{i:04d}-{'x' * 40}").write_bytes(b"")
    obs["listing"] = sorted(os.listdir(big)) == [f"file-{i:04d}-{'x' * 40}" for i in range(600)]
    # Delete a lower directory tree, recreate it: old entries stay hidden.
    shutil.rmtree(root / "tests")
    (root / "tests").mkdir()
    obs["recreated"] = os.listdir(root / "tests")
    # rmdir of a non-empty dir, mkdir over an existing name.
    try:
        os.rmdir(root / "src")
    except OSError as e:
        obs["rmdir_nonempty"] = e.errno
    try:
        os.mkdir(root / "src")
    except OSError as e:
        obs["mkdir_exists"] = e.errno
    # xattrs pass through.
    os.setxattr(root / "Makefile", "user.speculate", b"yes")
    obs["xattr"] = os.getxattr(root / "Makefile", "user.speculate")
    obs["statfs"] = os.statvfs(root).f_bsize > 0
    obs["symlink"] = (
        os.symlink("src/shop", root / "shop-link"),
        os.readlink(root / "shop-link"),
        sorted(os.listdir(root / "shop-link")),
    )
    return obs


@BOUNDED
@pytest.mark.parametrize("backend", backend_params(*MOUNTABLE))
def test_posix_surface_matches_native(
    backend: str, bounded: bool, project: Path, overlay: Overlay, tmp_path: Path
) -> None:
    require_host_mount(backend)
    if bounded:
        overlay = Overlay(project, bound=LayerBound())
    native = tmp_path / "native"
    shutil.copytree(project, native, symlinks=True)
    expected = _posix_observations(native)
    assert expected["rmdir_nonempty"] == errno.ENOTEMPTY
    before = tree_digest(project)
    with mounted(overlay, backend) as root:
        got = _posix_observations(root)
    assert got == expected
    assert tree_digest(project) == before


# Names the overlay formats of others give a meaning: here each is a file (or directory) like any other.
LOOKALIKES = [".wh.README.md", ".wh..wh..opq", "src/shop/.wh..wh..opq", "src/shop/.wh.cart.py", ".wh.data"]


@pytest.mark.parametrize("backend", backend_params(*BACKENDS))
def test_whiteout_lookalike_names_are_plain_files(backend: str, project: Path, overlay: Overlay) -> None:
    """Creating ``.wh.X`` hides nothing: the file appears as itself and promotion lands it. fuse-overlayfs
    refuses such file names itself (EINVAL; a directory it allows): there too nothing is hidden."""
    require_host_mount(backend)
    listed: dict[str, list[str]] = {}
    if not backends.get(backend).mountable:
        for rel in LOOKALIKES[:-1]:
            overlay.write_text(rel, f"user file {rel}\n")
        overlay.mkdir(LOOKALIKES[-1])
        listed = {d: overlay.listdir(d) for d in (".", "src/shop")}
    else:
        with mounted(overlay, backend) as root:
            refused = []
            for rel in LOOKALIKES:
                try:
                    (root / rel).mkdir() if rel == LOOKALIKES[-1] else (root / rel).write_text(
                        f"user file {rel}\n"
                    )
                except OSError as e:
                    refused.append((rel, e.errno))
            if backend == "fuse-overlayfs":
                assert refused == [(rel, errno.EINVAL) for rel in LOOKALIKES[:-1]]
            else:
                assert refused == []
            listed = {d: sorted(os.listdir(root / d)) for d in (".", "src/shop")}
            assert (root / "README.md").read_bytes() == (project / "README.md").read_bytes()
            assert (root / "src/shop/cart.py").read_bytes() == (project / "src/shop/cart.py").read_bytes()
    # Nothing is hidden: every real entry is still listed, beside the new names.
    assert set(os.listdir(project)) - {".git"} <= set(listed["."])
    assert set(os.listdir(project / "src/shop")) <= set(listed["src/shop"])
    reopened = Overlay(project, upper=overlay.upper)
    made = LOOKALIKES[-1:] if backend == "fuse-overlayfs" else LOOKALIKES
    assert {Path(rel).name for rel in made if "/" not in rel} <= set(listed["."])
    assert {Path(rel).name for rel in made if rel.startswith("src/shop/")} <= set(listed["src/shop"])
    assert changes(reopened) == {(rel, "added") for rel in made}
    assert reopened.promote().conflicts == []
    for rel in made[:-1]:
        assert (project / rel).read_text() == f"user file {rel}\n"
    assert (project / LOOKALIKES[-1]).is_dir()
    assert (project / "README.md").exists() and (project / "src/shop/cart.py").exists()


@pytest.mark.parametrize("backend", backend_params(*MOUNTABLE))
def test_a_copied_up_directory_keeps_its_mode(backend: str, project: Path, overlay: Overlay) -> None:
    """A group-writable directory (a checkout made under umask 002, as many normal users have) stays 0775 when
    a new file in it copies it up; our FUSE server made the upper one under its own umask, 0755."""
    require_host_mount(backend)
    (project / "src/shop").chmod(0o775)
    with mounted(overlay, backend) as root:
        (root / "src/shop/new.txt").write_text("new\n")
        assert stat.S_IMODE((root / "src/shop").stat().st_mode) == 0o775
    assert stat.S_IMODE((project / "src/shop").stat().st_mode) == 0o775
    assert changes(Overlay(project, upper=overlay.upper)) == {("src/shop/new.txt", "added")}
