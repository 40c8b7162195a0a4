"""The upper layer's hard bound: a private tmpfs that refuses a write past it at once, whoever writes (the
pure view, a command through each mounted backend), a run that reached it flagged even when the command
swallowed the error, and nothing left behind when the overlay goes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from overlayfs.bounded import LayerBound, MiB
from overlayfs.layer import REFUSED_FILE
from overlayfs.mount import mounted
from overlayfs.sandbox import SandboxLimits, run_sandboxed
from overlayfs.sandbox.limits import LayerWatch
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require

SMALL = LayerBound(bytes=4 * MiB, inodes=64)


def test_a_bound_is_checked_and_named() -> None:
    with pytest.raises(ValueError, match="bytes must be a positive integer"):
        LayerBound(bytes=0)
    with pytest.raises(ValueError, match="inodes must be at least 16"):
        LayerBound(inodes=3)
    with pytest.raises(ValueError, match="sandbox limit upper_inodes must be a positive integer"):
        SandboxLimits(upper_inodes=-1)


def test_the_pure_view_is_refused_at_the_bound(project: Path) -> None:
    ov = Overlay(project, bound=SMALL)
    try:
        assert ov.bound == SMALL and not os.fspath(ov.upper).startswith(os.fspath(ov.metadir.parent))
        ov.write_bytes("fits.bin", b"x" * (3 * MiB))
        with pytest.raises(OSError) as e:
            ov.write_bytes("too-much.bin", b"x" * (2 * MiB))
        assert e.value.errno == errno.ENOSPC
        assert not ov.exists("too-much.bin")  # nothing half-written is left
        assert ov.layer is not None and ov.layer.usage().bytes_used <= SMALL.bytes
        made = 0
        with pytest.raises(OSError) as e:
            while made < 1000:
                ov.mkdir(f"d{made}")
                made += 1
        assert e.value.errno == errno.ENOSPC and made < SMALL.inodes
        assert ov.layer.at_bound()
    finally:
        ov.discard()


def test_discard_frees_the_layer_and_mounts_nothing(project: Path) -> None:
    before = Path("/proc/self/mountinfo").read_text()
    ov = Overlay(project, bound=SMALL)
    layer = ov.layer
    assert layer is not None
    ov.write_text("a.txt", "a")
    assert Path("/proc/self/mountinfo").read_text() == before  # a detached mount: in no mount table
    device = os.stat(layer.path).st_dev
    assert device in _open_devices()
    ov.discard()
    # This process holds no descriptor into that tmpfs any longer, so the kernel frees it. (Its fd number
    # may already name something else another thread opened: compare devices, not paths.)
    assert device not in _open_devices()


def test_a_bounded_layer_reopened_by_its_upper_path_keeps_its_metadata_on_the_layer(project: Path) -> None:
    """The upper of a bounded overlay is a /proc/<pid>/fd/<n> path, whose magic link resolves to "/": a view
    reopened on it put its meta/ at the host's /meta (root read and wrote there; a normal user could not)."""
    ov = Overlay(project, bound=SMALL)
    try:
        ov.write_text("a.txt", "a")
        reopened = Overlay(project, upper=ov.upper)
        assert os.path.samefile(reopened.metadir, Path(ov.upper).parent / "meta"), reopened.metadir
        assert reopened.read_text("a.txt") == "a"
    finally:
        ov.discard()


def _open_devices() -> set[int]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.stat(f"/proc/self/fd/{fd}").st_dev)
        except OSError:
            pass  # closed while we listed
    return found


def test_an_unbounded_overlay_with_changes_cannot_be_bounded_later(project: Path, overlay: Overlay) -> None:
    overlay.write_text("a.txt", "a")
    with pytest.raises(ValueError, match=str(overlay.upper)):
        overlay.make_bounded(SMALL)
    fresh = Overlay(project)
    try:
        fresh.make_bounded(SMALL)
        assert fresh.bound == SMALL and fresh.layer is not None
    finally:
        fresh.discard()


SWALLOW = (
    "i=0; while dd if=/dev/zero of=f$i bs=1M count=1 2>/dev/null; do i=$((i+1)); done; echo wrote $i; exit 0"
)


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse", "fuse-overlayfs"))
def test_a_command_that_swallows_enospc_is_stopped_and_flagged(backend: str, project: Path) -> None:
    require(backend)
    ov = Overlay(project)
    try:
        r = run_sandboxed(
            ov,
            SWALLOW,
            timeout=30,
            backend=backend,
            limits=SandboxLimits(upper_bytes=SMALL.bytes, upper_inodes=SMALL.inodes),
        )
        assert r.limit == "upper_bytes", (r.exit_code, r.stdout, r.stderr)
        assert "reached its bound of 4194304 bytes" in r.stderr
        assert r.upper_peak is not None and r.upper_peak[0] <= SMALL.bytes
        assert "tmpfs: size=4194304" in (r.enforced or {}).get("writes", "")
        held = sum(p.lstat().st_blocks * 512 for p in Path(ov.upper).rglob("*"))
        assert held <= SMALL.bytes
    finally:
        ov.discard()


@pytest.mark.fuse
def test_the_fuse_server_marks_a_refusal_the_layer_no_longer_shows(project: Path) -> None:
    """Our FUSE server sees every ENOSPC and leaves a mark: a run is flagged by it even when the command
    freed the space again before anyone looked at the layer."""
    require("fuse")
    ov = Overlay(project, bound=SMALL)
    mark = ov.metadir / REFUSED_FILE
    try:
        with mounted(ov, "fuse") as root:
            with pytest.raises(OSError) as e, open(root / "big", "wb") as f:
                f.write(b"x" * (6 * MiB))
                f.flush()
            assert e.value.errno == errno.ENOSPC
            assert mark.exists()
            (root / "big").unlink()
        assert ov.layer is not None and not ov.layer.at_bound()  # the layer shows nothing now
        watch = LayerWatch(ov.layer, mark, lambda: None)
        assert watch.check() and watch.hit == "upper_bytes"
    finally:
        ov.discard()
