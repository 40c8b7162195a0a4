"""Every byte promotion and copy-up write is checked: on a filesystem with less free space than a change (a
small tmpfs, the layers on another filesystem so that copies take the EXDEV fallback), promotion rolls back
naming the user's file and copy-up fails without leaving a short file; never a truncated file reported as
copied. As root and, where a filesystem can be given to it, as a normal user (uid 65534)."""

from __future__ import annotations

import errno
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from overlayfs import Overlay, PromoteError
from overlayfs.copyup import copy_fd, copy_file
from overlayfs.state import pending, project_state
from tests.overlay.conftest import make_tree
from tests.overlay.crashkit import snapshot, temps
from tests.overlay.fskit import as_nobody, fill, free_space, tmpfs

BIG = 1_000_000  # the size of the reproduction: 602,112 and 704,512 bytes of it landed
LOWER = {"keep.txt": b"keep\n", "old.bin": b"old\n", "gone.txt": b"to be deleted\n", "d/x.txt": b"x\n"}


def payload(seed: int) -> bytes:
    return random.Random(seed).randbytes(BIG)


def new_file(ov: Overlay, data: bytes) -> str:
    ov.write_bytes("new.bin", data)
    return "new.bin"


def replaced_file(ov: Overlay, data: bytes) -> str:
    ov.write_bytes("old.bin", data)
    return "old.bin"


def new_dir(ov: Overlay, data: bytes) -> str:
    ov.mkdir("nd")
    ov.write_bytes("nd/inner.bin", data)
    return "nd/inner.bin"


def file_over_dir(ov: Overlay, data: bytes) -> str:
    ov.rmtree("d")
    ov.write_bytes("d", data)
    return "d"


def with_symlink(ov: Overlay, data: bytes) -> str:
    ov.symlink("keep.txt", "ln")
    ov.write_bytes("new.bin", data)
    return "new.bin"


KINDS: dict[str, Callable[[Overlay, bytes], str]] = {
    "new file": new_file,
    "replaced file": replaced_file,
    "new dir": new_dir,
    "file over dir": file_over_dir,
    "symlink": with_symlink,
}
LEAVE = [0, 4096, 300_000, 700_000, 990_000]  # bytes left free: a short write at every depth of the file


def speculate(root: Path, kind: str, seed: int) -> tuple[Overlay, str, bytes]:
    ov = Overlay(root)  # the layers live in the state dir, on another filesystem than the project
    data = payload(seed)
    big = KINDS[kind](ov, data)
    ov.unlink("gone.txt")  # a deletion alongside
    return ov, big, data


@pytest.mark.privileged
@pytest.mark.parametrize("kind", list(KINDS))
def test_promotion_onto_a_full_filesystem_rolls_back_naming_the_file(
    tmp_path: Path, state_dir: Path, kind: str
) -> None:
    with tmpfs(tmp_path / "mnt", "size=4m") as mnt:
        for leave in LEAVE:
            root = mnt / "proj"
            shutil.rmtree(root, ignore_errors=True)
            make_tree(root, LOWER)
            ov, big, data = speculate(root, kind, leave)
            before = snapshot(root)
            fill(mnt, leave)
            with pytest.raises(PromoteError) as e:
                ov.promote()
            assert e.value.errno == errno.ENOSPC, (leave, e.value)
            assert e.value.rel == big or leave == 0, (leave, e.value.rel)
            assert e.value.filename == f"{root}/{e.value.rel}" and ".ovl-tmp" not in str(e.value)
            assert "rolled back" in str(e.value)
            assert snapshot(root) == before, leave  # never a short file: nothing changed at all
            assert temps(root) == [] and not pending(project_state(root))
            free_space(mnt)
            assert ov.promote().ok  # the overlay is intact: with room, the whole change lands
            assert (root / big).read_bytes() == data
            assert not (root / "gone.txt").exists()
            ov.discard()


def test_copy_fd_never_reports_a_short_copy(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_bytes(payload(1))
    sfd = os.open(src, os.O_RDONLY)
    dfd = os.open("/dev/full", os.O_WRONLY)  # every write: ENOSPC
    try:
        with pytest.raises(OSError) as e:
            copy_fd(sfd, dfd)
        assert e.value.errno == errno.ENOSPC
    finally:
        os.close(sfd)
        os.close(dfd)


@pytest.mark.privileged
def test_a_failed_copy_leaves_no_partial_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "size=512k") as mnt:
        src = tmp_path / "src"
        src.write_bytes(payload(2))
        with pytest.raises(OSError) as e:
            copy_file(str(src), str(mnt / "dst"))
        assert e.value.errno == errno.ENOSPC
        assert not (mnt / "dst").exists()


# -- copy-up: the real tree on a disk, the upper layer on a tiny tmpfs --------------------------------


def open_rw(ov: Overlay) -> None:
    with ov.open("data/big.bin", "r+b") as f:
        f.write(b"!")


COPY_UPS: dict[str, Callable[[Overlay], object]] = {
    "open r+b": open_rw,
    "chmod": lambda ov: ov.chmod("data/big.bin", 0o600),
    "rename a file": lambda ov: ov.rename("data/big.bin", "moved.bin"),
    "rename a directory": lambda ov: ov.rename("data", "data2"),
    "write_bytes": lambda ov: ov.write_bytes("data/big.bin", payload(9)),
}


@pytest.mark.privileged
@pytest.mark.parametrize("meta", ["beside upper", "on another filesystem"])
@pytest.mark.parametrize("op", list(COPY_UPS))
def test_copy_up_onto_a_full_upper_fails_without_a_short_file(tmp_path: Path, op: str, meta: str) -> None:
    lower = tmp_path / "lower"
    make_tree(lower, {"data/big.bin": payload(3), "data/small.txt": b"small\n"})
    with tmpfs(tmp_path / "mnt", "size=4m") as mnt:
        for leave in (4096, 300_000, 700_000):
            shutil.rmtree(mnt / "layers", ignore_errors=True)
            ov = Overlay(
                lower,
                mnt / "layers/upper",
                metadir=tmp_path / f"meta{leave}" if meta != "beside upper" else None,
            )
            fill(mnt, leave)
            with pytest.raises(OSError) as e:
                COPY_UPS[op](ov)
            assert e.value.errno == errno.ENOSPC, (leave, e.value)
            free_space(mnt)  # (reading through the view records the read in meta/, which needs room too)
            assert ov.read_bytes("data/big.bin") == payload(3), leave  # the view still shows it whole
            assert not ov.exists("moved.bin") and not ov.exists("data2")
            assert ov.changes() == [], ov.changes()  # nothing half-copied in the upper layer
            COPY_UPS[op](ov)  # with room it works
            ov.discard()


# -- as a normal user -----------------------------------------------------------------------------------


@pytest.mark.privileged
@pytest.mark.parametrize("kind", ["replaced file", "new dir"])
def test_promotion_onto_a_full_filesystem_as_a_normal_user(kind: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount the tmpfs and to become uid 65534")
    base = Path(tempfile.mkdtemp(prefix="speculate-enospc-"))  # outside root's private pytest dir
    try:
        base.chmod(0o755)
        state = base / "state"
        state.mkdir()
        os.chown(state, 65534, 65534)
        with tmpfs(base / "mnt", "size=4m,uid=65534,gid=65534,mode=0755") as mnt:
            root = mnt / "proj"
            make_tree(root, LOWER)
            for p in [root, *root.rglob("*")]:
                os.lchown(p, 65534, 65534)
            before = snapshot(root)

            def child() -> dict:
                os.environ["SPECULATE_STATE_DIR"] = str(state)
                ov, big, _ = speculate(root, kind, 7)
                fill(mnt, 700_000)
                try:
                    ov.promote()
                    return {"ok": True, "size": (root / big).stat().st_size}
                except PromoteError as e:
                    return {"ok": False, "errno": e.errno, "rel": e.rel, "big": big, "msg": str(e)}

            out = as_nobody(child)
            assert out.get("ok") is False and out["errno"] == errno.ENOSPC, out
            assert out["rel"] == out["big"] and ".ovl-tmp" not in out["msg"], out
            free_space(mnt)
            assert snapshot(root) == before and temps(root) == []
    finally:
        shutil.rmtree(base)


@pytest.mark.privileged
def test_a_record_torn_by_a_full_disk_fails_its_operation_and_spares_the_next(tmp_path: Path) -> None:
    """The read set and the bases are appended line by line: a line a full disk cut short makes its
    operation fail, and the whole record appended after it (on the same line) still loads."""
    from overlayfs.layer import READS_FILE, Identity, load_identities, record_read

    with tmpfs(tmp_path / "mnt", "size=1m") as meta:
        first = Identity("a" * 3900, True, "file", 1)  # its line ends a little before the page does
        record_read(meta, first)
        fill(meta, 0)
        assert (meta / READS_FILE).stat().st_size < 4096
        with pytest.raises(OSError) as e:
            record_read(meta, Identity("torn", True, "file", 2))  # crosses into a page there is no room for
        assert e.value.errno == errno.ENOSPC
        assert (meta / READS_FILE).stat().st_size == 4096  # part of it landed
        free_space(meta)
        record_read(meta, Identity("after", True, "file", 3))
        assert set(load_identities(meta, READS_FILE)) == {first.path, "after"}
