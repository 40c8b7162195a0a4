"""Acceptance keeps a file's identity as the live run does (#34 item 3; docs/overlay.md "In place").

The same commands run live on one tree and in a fork (each backend) on an identical one, which is then
accepted: every file ends up the same, inode kept or not as live, the other hard links (inside the
project and outside it) showing what live shows, user xattrs, ACLs, owner, mode and allocated blocks.
Each command is one of the ways a file changes: an append, ``dd conv=notrunc`` on a 512 MiB sparse file,
a truncating write, an mmap write (all in place: the inode stays), and ``sed -i`` (a new file renamed over:
the links break, the user xattr goes, GNU sed copies the ACL and, as root, the owner).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from overlayfs.mount import mounted
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require_host_mount
from tests.overlay.test_sparse_and_owner import DD_AT, SIZE, SLACK, make_sparse

OWNER = 1000
MMAP = (
    "import mmap, sys\n"
    "with open(sys.argv[1], 'r+b') as f:\n"
    "    m = mmap.mmap(f.fileno(), 0)\n"
    "    m[0:5] = b'MMAPD'\n"
    "    m.flush()\n"
    "    m.close()\n"
)
BLOCK = bytes(range(256)) * 16  # what dd writes into the hole


def need_tools(tmp: Path) -> None:
    for tool in ("setfacl", "getfacl", "sed", "dd"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs acl and attr)")
    probe = tmp / ".xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs on {tmp}: {e}")
    finally:
        probe.unlink()


def make(root: Path, out: Path) -> None:
    """The project and, outside it, a second link of three of its files."""
    root.mkdir(parents=True)
    out.mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    os.link(root / "a.txt", root / "a.link")  # a hard link inside the project
    os.link(root / "a.txt", out / "a.out")  # and one outside it
    (root / "c.txt").write_text("old content, longer than the new\n")
    subprocess.run(["setfacl", "-m", "u:65534:rw", root / "c.txt"], check=True)
    (root / "m.txt").write_text("mmap target\n")
    os.setxattr(root / "m.txt", "user.x", b"1")
    (root / "s.txt").write_text("alpha\n")
    os.setxattr(root / "s.txt", "user.x", b"1")
    subprocess.run(["setfacl", "-m", "u:65534:r", root / "s.txt"], check=True)
    os.link(root / "s.txt", out / "s.out")
    make_sparse(root / "disk.img")
    os.link(root / "disk.img", out / "disk.out")
    if os.geteuid() == 0:  # a tree of another user's, as root
        for name in ("a.txt", "c.txt", "m.txt", "s.txt", "disk.img"):
            os.chown(root / name, OWNER, OWNER)


def commands(block: Path) -> list[str]:
    return [
        "echo beta >> a.txt",
        f"dd if={block} of=disk.img bs=4096 count=1 seek={DD_AT // 4096} conv=notrunc status=none",
        "printf 'new\\n' > c.txt",
        f'{sys.executable} -c "$MMAP" m.txt',
        "sed -i s/alpha/gamma/ s.txt",
    ]


def run_shell(root: Path, block: Path, *, sed: bool = True) -> None:
    for cmd in commands(block)[: None if sed else -1]:
        subprocess.run(["sh", "-c", cmd], cwd=root, check=True, env={**os.environ, "MMAP": MMAP})


def run_live_pure(root: Path, block: Path) -> None:
    """Live, what :func:`run_pure` does: the writes in place by the shell, the replacement as the live Edit
    tool makes it (speculate.fs.LocalFS, which leaves what Claude Code's Edit leaves: test_tools_identity)."""
    from speculate.fs import LocalFS

    run_shell(root, block, sed=False)
    fs = LocalFS(root)
    fs.write_bytes("s.txt", fs.read_bytes("s.txt").replace(b"alpha", b"gamma"))


def run_pure(ov: Overlay, block: Path) -> None:
    """The same changes through the pure view's API (no mount): writes in place and one replacement."""
    with ov.open("a.txt", "a") as f:
        f.write("beta\n")
    with ov.open("disk.img", "r+b") as f:
        f.seek(DD_AT)
        f.write(block.read_bytes())
    with ov.open("c.txt", "w") as f:
        f.write("new\n")
    import mmap

    with ov.open("m.txt", "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
        m[0:5] = b"MMAPD"
        m.close()
    # A whole-file replacement, as the Edit tool makes it (live: run_live_pure).
    ov.write_bytes("s.txt", ov.read_bytes("s.txt").replace(b"alpha", b"gamma"))


def acl(p: Path) -> str:
    return subprocess.run(["getfacl", "-cp", p], capture_output=True, text=True, check=True).stdout


def describe(root: Path, out: Path, before: dict[str, int]) -> dict[str, object]:
    desc: dict[str, object] = {}
    for p in [*sorted(root.iterdir()), *sorted(out.iterdir())]:
        if p.name.startswith("."):
            continue
        st = p.stat()
        xattrs = {n: os.getxattr(p, n) for n in os.listxattr(p) if n.startswith("user.")}
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        where = "in" if p.parent == root else "out"
        desc[f"{where}/{p.name}"] = {
            "inode kept": st.st_ino == before.get(f"{where}/{p.name}"),
            "links": st.st_nlink,
            "content": digest,
            "xattrs": xattrs,
            "acl": acl(p) if p.parent == root else "",
            "owner": (st.st_uid, st.st_gid),
            "mode": oct(st.st_mode),
            "blocks": st.st_blocks * 512 // SLACK,  # within the slack the live file's allocation moves by
        }
    return desc


def inodes(root: Path, out: Path) -> dict[str, int]:
    return {f"{w}/{p.name}": p.stat().st_ino for w, d in (("in", root), ("out", out)) for p in d.iterdir()}


def live_and_fork(
    base: Path, fork: Callable[[Path, Path], None], live_run: Callable[[Path, Path], None] = run_shell
) -> tuple[object, object]:
    block = base / "block"
    block.write_bytes(BLOCK)
    make(base / "live", base / "live-out")
    before = inodes(base / "live", base / "live-out")
    live_run(base / "live", block)
    live = describe(base / "live", base / "live-out", before)
    make(base / "proj", base / "proj-out")
    before = inodes(base / "proj", base / "proj-out")
    fork(base / "proj", block)
    accepted = describe(base / "proj", base / "proj-out", before)
    return live, accepted


@pytest.mark.slow  # a 512 MiB sparse file twice, and a mount
@pytest.mark.parametrize("backend", backend_params("pure", "kernel", "fuse", "fuse-overlayfs"))
def test_accepted_files_keep_their_identity_as_live(backend: str, tmp_path: Path) -> None:
    need_tools(tmp_path)

    def fork(root: Path, block: Path) -> None:
        ov = Overlay(root, upper=tmp_path / "layers" / "upper")
        if backend == "pure":
            run_pure(ov, block)
        else:
            require_host_mount(backend)
            with mounted(ov, backend) as merged:
                run_shell(merged, block)
        result = Overlay(root, upper=tmp_path / "layers" / "upper").promote()
        assert result.ok, result.conflicts

    live, accepted = live_and_fork(tmp_path, fork, run_live_pure if backend == "pure" else run_shell)
    assert live == accepted
    assert (tmp_path / "proj/disk.img").stat().st_size == SIZE


@pytest.mark.slow
def test_identity_as_a_normal_user() -> None:
    """The pure view and the FUSE server (where it can mount) as uid 65534 on its own tree."""
    if os.geteuid() != 0:
        pytest.skip("already a normal user: the test above is this user's")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to a normal user")
    from tests.sandbox.test_escapes import NOBODY, RUNNER_IMPORTS, _as_nobody, _code_paths

    base = Path(tempfile.mkdtemp(prefix="speculate-identity-user-", dir="/var/lib"))
    try:
        need_tools(base)
        # The case imports this module (and so pytest) and speculate.fs: a copy for uid 65534 holds them.
        paths = _code_paths(base, f"{RUNNER_IMPORTS}, tests.overlay.test_identity, speculate.fs")
        os.chown(base, NOBODY, NOBODY)
        r = _as_nobody(
            "import os, sys; from pathlib import Path; "
            f"os.environ['SPECULATE_STATE_DIR'] = {os.fspath(base / 'state')!r}; "
            "from tests.overlay.test_identity import as_user_case; "
            f"print(as_user_case(Path({os.fspath(base)!r})))",
            base,
            paths,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.split()[-1] == "same", r.stdout[-3000:]
        print(r.stdout.splitlines()[-2])  # which backends ran
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_user_case(base: Path) -> str:
    """The pure view, then our FUSE server where this user can mount it; "same" when each run matched."""
    from overlayfs.backends import unavailable_reason

    out = []
    for backend in ("pure", "fuse"):
        if backend == "fuse" and unavailable_reason(backend) is not None:
            out.append(f"fuse skipped: {unavailable_reason(backend)}")
            continue
        here = base / backend
        here.mkdir()

        def fork(root: Path, block: Path, backend: str = backend, here: Path = here) -> None:
            ov = Overlay(root, upper=here / "layers" / "upper")
            if backend == "pure":
                run_pure(ov, block)
            else:
                with mounted(ov, backend) as merged:
                    run_shell(merged, block)
            assert Overlay(root, upper=here / "layers" / "upper").promote().ok

        live, accepted = live_and_fork(here, fork, run_live_pure if backend == "pure" else run_shell)
        if live != accepted:
            return f"{backend}: live {live}\naccepted {accepted}\ndiffer"
        out.append(f"{backend} ok")
    return "; ".join(out) + "\nsame"
