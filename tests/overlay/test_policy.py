"""What acceptance lands (docs/security.md): never setuid/setgid bits, sticky or world-writable bits only where
the real entry had them, no extended attributes (file capabilities, security.*, trusted.*, user.*), no FIFO,
socket or device node (refused by name, never an exception), no symlink that resolves outside the project.

The upper layer is written directly where the view itself would refuse, as a sandboxed command writing
through a mounted backend leaves it (e.g. ``cp /bin/sh sh; chmod 4755 sh``)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from overlayfs import Conflict, Overlay
from tests.overlay.conftest import make_tree, snapshot
from tests.overlay.fskit import NOBODY, as_nobody


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_setuid_setgid_sticky_and_world_writable_bits_do_not_land(project: Path, ov: Overlay) -> None:
    (project / "shared.txt").write_bytes(b"shared\n")
    (project / "shared.txt").chmod(0o666)  # the user's own choice: a rewrite keeps it
    shutil.copy("/bin/sh", ov.upper / "sh")
    os.chmod(ov.upper / "sh", 0o4755)
    ov.write_bytes("g.sh", b"#!/bin/sh\n")
    os.chmod(ov.upper / "g.sh", 0o2775)
    ov.write_bytes("ww.txt", b"w\n")
    os.chmod(ov.upper / "ww.txt", 0o666)
    ov.mkdir("tmpdir")
    os.chmod(ov.upper / "tmpdir", 0o1777)
    ov.write_bytes("shared.txt", b"shared, rewritten\n")
    ov.write_bytes("bin/run.sh", b"#!/bin/sh\necho changed\n")
    os.chmod(ov.upper / "bin/run.sh", 0o6755)
    assert ov.promote().ok
    assert mode(project / "sh") == 0o755  # not -rwsr-xr-x root
    assert mode(project / "g.sh") == 0o775
    assert mode(project / "ww.txt") == 0o664
    assert mode(project / "tmpdir") == 0o775
    assert mode(project / "shared.txt") == 0o666
    assert mode(project / "bin/run.sh") == 0o755


CAP_NET_RAW_EP = bytes.fromhex("0100000200200000000000000000000000000000")  # v2, effective


def test_no_extended_attribute_lands(project: Path, ov: Overlay) -> None:
    """Promotion copies bytes and the mode only: capabilities, security.*, trusted.* and user.* stay behind."""
    ov.write_bytes("cap.bin", b"\x7fELF not really\n")
    ov.write_bytes("README.md", b"# rewritten\n")
    ov.mkdir("xd")
    ov.write_bytes("xd/f.txt", b"f\n")
    names = {"user.note"} | ({"trusted.planted", "security.capability"} if os.geteuid() == 0 else set())
    for rel in ("cap.bin", "README.md", "xd", "xd/f.txt"):
        p = ov.upper / rel
        os.setxattr(p, "user.note", b"planted")
        if os.geteuid() == 0:
            os.setxattr(p, "trusted.planted", b"planted")
            if not p.is_dir():
                os.setxattr(p, "security.capability", CAP_NET_RAW_EP)
    if shutil.which("getcap") and os.geteuid() == 0:
        assert (
            "cap_net_raw"
            in subprocess.run(["getcap", str(ov.upper / "cap.bin")], capture_output=True, text=True).stdout
        )  # the capability really is set there
    assert ov.promote().ok
    for rel in ("cap.bin", "README.md", "xd", "xd/f.txt"):
        assert not names & set(os.listxattr(project / rel)), (rel, os.listxattr(project / rel))


def make_special(path: Path, kind: str) -> None:
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "socket":
        cwd = os.getcwd()
        os.chdir(path.parent)  # a socket's path must be short
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(path.name)
        finally:
            os.chdir(cwd)
    elif kind == "character device":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers (0/0 is a whiteout)
    else:
        os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(7, 0))


@pytest.mark.parametrize(
    "kind",
    [
        "FIFO",
        "socket",
        *(pytest.param(k, marks=pytest.mark.privileged) for k in ("character device", "block device")),
    ],
)
def test_a_special_file_is_refused_by_name_never_an_exception(project: Path, ov: Overlay, kind: str) -> None:
    if "device" in kind and os.geteuid() != 0:
        pytest.skip("mknod of a device needs root")
    ov.write_bytes("src/new.py", b"x = 1\n")  # an ordinary change alongside
    make_special(ov.upper / "src/special", kind)
    before = snapshot(project)
    res = ov.promote()
    assert res.promoted == [] and res.conflicts == [
        Conflict("src/special", f"a {kind}: special files are never accepted")
    ]
    assert snapshot(project) == before
    part = ov.promote(all_or_nothing=False)  # the rest can still be taken on its own
    assert [c.path for c in part.promoted] == ["src/new.py"] and [c.path for c in part.conflicts] == [
        "src/special"
    ]
    assert not os.path.lexists(project / "src/special")


def test_deleting_a_special_file_of_the_real_tree_is_allowed(project: Path) -> None:
    os.mkfifo(project / "pipe")
    ov = Overlay(project)
    ov.unlink("pipe")
    assert ov.promote().ok and not os.path.lexists(project / "pipe")
    ov.discard()


OUTSIDE = {  # targets of a link at src/out
    "absolute": "/etc/passwd",
    "up and out": "../../outside",
    "down, then out": "../src/../../x",
    "the root": "/",
    "through the user's link out": "../ext/..",  # ext -> /usr: ".." after it is /, not the project
    "through a new link out": "../a-new-link/x",  # a-new-link -> /tmp, itself refused too
}


@pytest.mark.parametrize("how", list(OUTSIDE))
def test_a_symlink_resolving_outside_the_project_is_refused(project: Path, how: str) -> None:
    os.symlink("/usr", project / "ext")
    ov = Overlay(project)
    ov.write_bytes("src/new.py", b"x = 1\n")
    if how == "through a new link out":
        os.symlink("/tmp", ov.upper / "a-new-link")
    os.symlink(OUTSIDE[how], ov.upper / "src/out")
    before = snapshot(project)
    res = ov.promote()
    assert "src/out" in {c.path for c in res.conflicts}, res
    reason = next(c.reason for c in res.conflicts if c.path == "src/out")
    assert reason.startswith(f"a symlink to {OUTSIDE[how]}") and "outside the project" in reason
    assert snapshot(project) == before
    ov.discard()


def test_a_directory_replaced_by_a_symlink_out_is_refused(project: Path, ov: Overlay) -> None:
    ov.rmtree("docs")
    os.unlink(ov.upper / "docs")  # the whiteout the view left: a sandboxed `rm -r docs; ln -s /etc docs`
    os.symlink("/etc", ov.upper / "docs")
    before = snapshot(project)
    res = ov.promote()
    assert [c.path for c in res.conflicts] == ["docs"] and "/etc" in res.conflicts[0].reason
    assert snapshot(project) == before and (project / "docs").is_dir()


@pytest.mark.parametrize(
    "target", ["src/app.py", "../README.md", "nowhere", "{root}/README.md", "lnk/app.py", "deep/../.."]
)
def test_symlinks_that_stay_inside_land(project: Path, ov: Overlay, target: str) -> None:
    os.symlink("src", project / "lnk")
    os.symlink("src/pkg", project / "deep")  # deep/../.. is src/pkg/../.. as the kernel resolves it: the root
    where = "here"
    if target == "../README.md":  # from a new subdirectory, up into the project
        ov.mkdir("sub")
        where = "sub/here"
    os.symlink(target.format(root=project), ov.upper / where)
    assert ov.promote().ok
    assert os.readlink(project / where) == target.format(root=project)


@pytest.mark.privileged
def test_the_policy_as_a_normal_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to become uid 65534 (the rules are the same for any user)")
    base = Path(tempfile.mkdtemp(prefix="speculate-policy-"))  # outside root's private pytest dir
    try:
        base.chmod(0o755)
        root, state = base / "proj", base / "state"
        make_tree(root, {"a.txt": b"a\n"})
        state.mkdir()
        for p in [state, root, *root.rglob("*")]:
            os.lchown(p, NOBODY, NOBODY)

        def child() -> dict:
            os.environ["SPECULATE_STATE_DIR"] = str(state)
            ov = Overlay(root)
            ov.write_bytes("s.sh", b"#!/bin/sh\n")
            os.chmod(ov.upper / "s.sh", 0o6777)
            os.mkfifo(ov.upper / "pipe")
            os.symlink("/etc/shadow", ov.upper / "out")
            res = ov.promote(all_or_nothing=False)
            return {"promoted": [c.path for c in res.promoted], "conflicts": [c.path for c in res.conflicts]}

        out = as_nobody(child)
        assert out == {"promoted": ["s.sh"], "conflicts": ["out", "pipe"]}, out
        assert mode(root / "s.sh") == 0o775 and os.lstat(root / "s.sh").st_uid == NOBODY
        assert not os.path.lexists(root / "pipe") and not os.path.lexists(root / "out")
    finally:
        shutil.rmtree(base)
