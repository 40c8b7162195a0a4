"""The FUSE server's copy-up keeps holes and extended attributes (#34 item 4; docs/overlay.md "In place"):
a 512 MiB file with 8 KiB of data, changed by one ``dd conv=notrunc`` through the mount, takes a few blocks
in the upper layer, not 512 MiB; its ``user.*`` xattr and ACL are in the upper file as the kernel's
copy-up leaves them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from overlayfs.mount import mounted
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require_host_mount
from tests.overlay.test_sparse_and_owner import SLACK, allocated, dd, dd_copy, make_sparse


@pytest.mark.parametrize("backend", backend_params("fuse"))
def test_fuse_copy_up_keeps_holes(backend: str, tmp_path: Path) -> None:
    require_host_mount(backend)
    project = tmp_path / "proj"
    project.mkdir()
    make_sparse(project / "disk.img")
    live = tmp_path / "live.img"
    subprocess.run(["cp", "--sparse=always", project / "disk.img", live], check=True)
    dd(live)
    ov = Overlay(project, upper=tmp_path / "layers" / "upper")
    with mounted(ov, backend) as root:
        dd_copy(live, root / "disk.img")
    upper = tmp_path / "layers/upper/disk.img"
    assert upper.stat().st_size == live.stat().st_size
    assert allocated(upper) <= allocated(live) + SLACK, f"holes written out: {allocated(upper)} bytes"
    assert subprocess.run(["cmp", upper, live]).returncode == 0


@pytest.mark.parametrize("backend", backend_params("fuse"))
def test_fuse_copy_up_carries_xattrs_and_acl(backend: str, tmp_path: Path) -> None:
    require_host_mount(backend)
    if shutil.which("setfacl") is None:
        pytest.skip("setfacl is not installed (the acl package)")
    project = tmp_path / "proj"
    project.mkdir()
    f = project / "a.txt"
    f.write_text("alpha\n")
    try:
        os.setxattr(f, "user.x", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs on {tmp_path}: {e}")
    subprocess.run(["setfacl", "-m", "u:65534:rw", f], check=True)
    acl = os.getxattr(f, "system.posix_acl_access")
    ov = Overlay(project, upper=tmp_path / "layers" / "upper")
    with mounted(ov, backend) as root:
        with open(root / "a.txt", "a") as out:
            out.write("beta\n")
    upper = tmp_path / "layers/upper/a.txt"
    assert upper.read_text() == "alpha\nbeta\n"
    assert os.getxattr(upper, "user.x") == b"1"
    assert os.getxattr(upper, "system.posix_acl_access") == acl
