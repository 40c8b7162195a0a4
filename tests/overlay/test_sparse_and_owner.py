"""Acceptance lands what the live run would have left (#34 items 2 and 4): holes stay holes through copy-up
and promotion, and root replacing someone else's file keeps its owner and group."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from overlayfs.copyup import copy_file
from overlayfs.mount import mounted
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require_host_mount

SIZE = 512 << 20
DD_AT = 100 << 20  # dd's block lands in a hole
SLACK = 32 << 10  # "within a few blocks" of the live file's allocation


def make_sparse(path: Path) -> None:
    """512 MiB apparent, 8 KiB of data (4 KiB at the start, 4 KiB in the middle)."""
    with open(path, "wb") as f:
        f.truncate(SIZE)
        f.write(b"a" * 4096)
        f.seek(SIZE // 2)
        f.write(b"b" * 4096)


def dd(path: Path) -> None:
    subprocess.run(
        [
            "dd",
            "if=/dev/urandom",
            f"of={path}",
            "bs=4096",
            "count=1",
            f"seek={DD_AT // 4096}",
            "conv=notrunc",
        ],
        check=True,
        capture_output=True,
    )


def allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


# FUSE backends write the holes out on copy-up (the upper layer holds 512 MiB); promotion lands zero blocks
# as holes where the file it replaces had holes, so what lands is what the live run leaves there too.
@pytest.mark.parametrize("backend", backend_params("pure", "kernel", "fuse", "fuse-overlayfs"))
def test_a_sparse_file_changed_by_dd_lands_sparse(backend: str, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    make_sparse(project / "disk.img")
    live = tmp_path / "live.img"
    subprocess.run(["cp", "--sparse=always", project / "disk.img", live], check=True)
    dd(live)
    ov = Overlay(project, upper=tmp_path / "layers" / "upper")
    if backend == "pure":
        with ov.open("disk.img", "r+b") as f:  # what dd conv=notrunc does: one block in place
            f.seek(DD_AT)
            f.write(_block(live))
    else:
        require_host_mount(backend)
        with mounted(ov, backend) as root:
            dd_copy(live, root / "disk.img")
    if backend == "pure":  # kernel overlayfs copies up from each data extent's start in 1 MiB chunks
        assert allocated(tmp_path / "layers/upper/disk.img") <= allocated(live) + SLACK, "holes written out"
    result = Overlay(project, upper=tmp_path / "layers" / "upper").promote()
    assert result.ok and not result.conflicts
    landed = project / "disk.img"
    assert landed.stat().st_size == SIZE
    assert abs(allocated(landed) - allocated(live)) <= SLACK, (allocated(landed), allocated(live))
    assert subprocess.run(["cmp", landed, live]).returncode == 0


def _block(live: Path) -> bytes:
    with open(live, "rb") as f:
        f.seek(DD_AT)
        return f.read(4096)


def dd_copy(live: Path, target: Path) -> None:
    """dd the block the live file got into ``target`` (the same bytes: the contents compare equal)."""
    src = target.parent / ".block"
    src.write_bytes(_block(live))
    subprocess.run(
        ["dd", f"if={src}", f"of={target}", "bs=4096", "count=1", f"seek={DD_AT // 4096}", "conv=notrunc"],
        check=True,
        capture_output=True,
    )
    src.unlink()


@pytest.mark.slow
def test_a_sparse_file_lands_sparse_as_a_normal_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("already a normal user: the test above is this user's")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to a normal user")
    from tests.sandbox.test_escapes import NOBODY, RUNNER_IMPORTS, _as_nobody, _code_paths

    base = Path(tempfile.mkdtemp(prefix="speculate-sparse-user-", dir="/var/lib"))
    try:
        # The case imports this module (and so pytest): a copy for uid 65534 holds what that imports.
        paths = _code_paths(base, f"{RUNNER_IMPORTS}, tests.overlay.test_sparse_and_owner")
        os.chown(base, NOBODY, NOBODY)
        r = _as_nobody(
            "import os, sys; from pathlib import Path; "
            f"os.environ['SPECULATE_STATE_DIR'] = {os.fspath(base / 'state')!r}; "
            "from tests.overlay.test_sparse_and_owner import as_user_case; "
            f"print(as_user_case(Path({os.fspath(base)!r})))",
            base,
            paths,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        landed, live = map(int, r.stdout.split())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert abs(landed - live) <= SLACK, (landed, live)


def as_user_case(base: Path) -> str:
    """The pure backend's copy-up and promotion of a dd'd sparse file; prints the allocated bytes of the
    landed file and of the live one (the contents are compared here)."""
    project = base / "proj"
    project.mkdir()
    make_sparse(project / "disk.img")
    live = base / "live.img"
    subprocess.run(["cp", "--sparse=always", project / "disk.img", live], check=True)
    dd(live)
    ov = Overlay(project, upper=base / "layers" / "upper")
    with ov.open("disk.img", "r+b") as f:
        f.seek(DD_AT)
        f.write(_block(live))
    assert ov.promote().ok
    assert subprocess.run(["cmp", project / "disk.img", live]).returncode == 0
    return f"{allocated(project / 'disk.img')} {allocated(live)}"


# -- owners -----------------------------------------------------------------------------------------------


def _sed_i(root: Path) -> None:
    """What ``sed -i`` does: a new file beside, renamed over the old one."""
    tmp = root / "src" / ".sedXYZ"
    tmp.write_text("changed\n")
    tmp.chmod(0o640)
    tmp.rename(root / "src" / "conf.txt")


def _in_place(root: Path) -> None:
    with open(root / "src" / "conf.txt", "r+") as f:
        f.write("changed\n")
        f.truncate()


@pytest.mark.parametrize("how", ["sed -i", "in place"])
@pytest.mark.parametrize("backend", backend_params("pure", "kernel"))
def test_root_promotion_keeps_the_owner_of_a_replaced_file(backend: str, how: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: files owned by another user")
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    conf = project / "src" / "conf.txt"
    conf.write_text("original\n")
    os.chown(conf, 1000, 1000)
    conf.chmod(0o640)
    ov = Overlay(project, upper=tmp_path / "layers" / "upper")
    if backend == "pure":
        if how == "sed -i":
            ov.write_text("src/.sedXYZ", "changed\n")
            ov.chmod("src/.sedXYZ", 0o640)
            ov.rename("src/.sedXYZ", "src/conf.txt")
        else:
            with ov.open("src/conf.txt", "r+") as f:
                f.write("changed\n")
                f.truncate()
    else:
        require_host_mount(backend)
        with mounted(ov, backend) as root:
            (_sed_i if how == "sed -i" else _in_place)(root)
    assert Overlay(project, upper=tmp_path / "layers" / "upper").promote().ok
    st = conf.stat()
    assert conf.read_text() == "changed\n"
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1000, 1000, 0o640)


def test_root_promotion_lands_the_owner_the_fork_gave() -> None:
    """A ``chown`` in the fork is what the live run leaves: kept, not replaced by the old owner."""
    if os.geteuid() != 0:
        pytest.skip("needs root: files owned by another user")
    with tempfile.TemporaryDirectory() as d:
        project = Path(d, "proj")
        project.mkdir()
        conf = project / "conf.txt"
        conf.write_text("original\n")
        os.chown(conf, 1000, 1000)
        ov = Overlay(project, upper=Path(d, "upper"))
        ov.write_text("conf.txt", "changed\n")
        os.chown(Path(d, "upper/conf.txt"), 2000, 2000)  # as a chown in a mounted fork leaves it
        assert ov.promote().ok
        assert (conf.stat().st_uid, conf.stat().st_gid) == (2000, 2000)


def test_a_dense_file_of_zeros_stays_dense(tmp_path: Path) -> None:
    """Zero blocks become holes only where the source, or the file a promotion replaces, had holes: a file
    written out on purpose (a preallocated database, a swap file) keeps its blocks."""
    src = tmp_path / "dense"
    src.write_bytes(bytes(1 << 20))
    copy_file(str(src), str(tmp_path / "copy"))
    assert allocated(tmp_path / "copy") >= 1 << 20
    copy_file(str(src), str(tmp_path / "holes"), sparse=True)
    assert allocated(tmp_path / "holes") <= SLACK
    assert (tmp_path / "copy").read_bytes() == (tmp_path / "holes").read_bytes() == bytes(1 << 20)
