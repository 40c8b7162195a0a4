"""Nothing wedges our FUSE server, or a command on it, for good: a FIFO removed or renamed over (the server
opened it and waited for a writer), a command stuck in a request the server cannot answer (a hung
filesystem inside the project: its timeout and a cancel abort the view instead of waiting forever), an
owner that died while the server was stuck; churned names stay within the layer's bound; a tree deeper
than PATH_MAX is a named boundary, not a crash; requests on unlinked files act on them. As root, and the
first two as uid 65534."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import trio

from overlayfs import layer
from overlayfs.bounded import LayerBound, MiB
from overlayfs.errors import HostPathTooLong
from overlayfs.mount import mounted
from overlayfs.sandbox import CancelToken, run_sandboxed, sandbox_problem
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require
from tests.mount.wedgekit import FIFO_COMMAND, black_hole, guarded, our_servers

FUSE = backend_params("fuse")
REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534


def _sandbox(backend: str) -> None:
    require(backend)
    why = sandbox_problem()
    if why is not None:
        pytest.skip(f"no sandbox here: {why}")


@pytest.mark.parametrize("backend", FUSE)
def test_removing_or_renaming_over_a_fifo_does_not_wedge_the_server(backend: str, overlay: Overlay) -> None:
    _sandbox(backend)
    r, took, wedged = guarded(lambda: run_sandboxed(overlay, FIFO_COMMAND, timeout=20, backend=backend), 25)
    assert not wedged, "the server was stuck on the FIFO"
    assert r.exit_code == 0 and "q" in r.stdout.split() and r.stdout.endswith("done\n"), r.stderr
    assert took < 10
    overlay.discard()


@pytest.mark.parametrize("backend", FUSE)
def test_a_command_stuck_in_its_view_times_out_and_the_view_is_aborted(backend: str, project: Path) -> None:
    """A command in a request the server cannot answer sleeps uninterruptibly: no kill ends it. After its
    timeout the view's connection is aborted and its server ended; the next command gets a fresh view."""
    _sandbox(backend)
    (project / "hole").mkdir()
    ov = Overlay(project)
    try:
        with black_hole(project / "hole"):
            r, took, wedged = guarded(
                lambda: run_sandboxed(ov, "ls hole/; echo never", timeout=2, backend=backend), 25
            )
            assert not wedged, "the timeout did not end the command"
            assert r.timed_out and r.exit_code == 124 and "never" not in r.stdout
            assert "the view was aborted" in r.stderr and r.backend_failed is None
            assert took < 8
            assert our_servers() == []  # the stuck server was ended, not left behind
            token = CancelToken()
            r, took, wedged = guarded(lambda: _cancelled_after(ov, backend, token, 1.0), 25)
            assert not wedged, "cancel did not end the command"
            after_cancel = took - 1.0
            assert r.cancelled and after_cancel < 1.0, after_cancel
        r = run_sandboxed(ov, "cat README.md | head -1", timeout=20, backend=backend)
        assert r.exit_code == 0 and r.stdout, r.stderr
    finally:
        ov.discard()


def _cancelled_after(ov: Overlay, backend: str, token: CancelToken, delay: float) -> object:
    import threading

    threading.Timer(delay, token.cancel).start()
    return run_sandboxed(ov, "ls hole/", timeout=60, backend=backend, cancel=token)


OWNER = textwrap.dedent(
    """
    import sys, time
    from overlayfs.mount import open_mount
    from overlayfs.view import Overlay
    m = open_mount(Overlay(sys.argv[1], upper=sys.argv[2]), "fuse")
    print(m.root, m._proc.pid, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.fuse
def test_the_owner_watch_ends_a_wedged_server(project: Path, tmp_path: Path) -> None:
    """The owner died while its server was stuck in a request: the server must end (its connection aborted,
    so the process waiting on it goes too), not only be unmounted."""
    require("fuse")
    (project / "hole").mkdir()
    with black_hole(project / "hole"):
        owner = subprocess.Popen(
            [sys.executable, "-c", OWNER, os.fspath(project), os.fspath(tmp_path / "upper")],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert owner.stdout is not None
        root, server = owner.stdout.readline().split()
        stuck = subprocess.Popen(
            ["ls", f"{root}/hole/"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(0.5)
        assert stuck.poll() is None  # waiting on the server, which waits on the hole
        owner.kill()
        owner.wait()
        owner.stdout.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(f"/proc/{server}"):
            time.sleep(0.05)
        gone = not os.path.exists(f"/proc/{server}") or _zombie(int(server))
        if not gone:
            os.kill(int(server), 9)
        assert gone, "the server outlived its owner"
        assert stuck.wait(10) != 0  # answered (ENOTCONN), not asleep for good


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("backend", FUSE)
def test_churning_new_names_stops_at_the_bound_not_on_the_host_disk(backend: str, project: Path) -> None:
    """Each new name is a base record in meta/ on the host's disk: a churn of them wrote 26 MB in 20 s while
    the upper layer stayed empty. The records count against the layer's bound now."""
    _sandbox(backend)
    bound = LayerBound(bytes=2 * MiB, inodes=1000)
    ov = Overlay(project, bound=bound)
    churn = (
        "import os\n"
        "for i in range(12000):\n"
        "    n = 'd' * 200 + str(i)\n"
        "    open(n, 'w').close()\n"
        "    os.unlink(n)\n"
    )
    try:
        r = run_sandboxed(ov, f'{sys.executable} -c "{churn}"', timeout=120, backend=backend)
        meta = sum(os.stat(ov.metadir / n).st_size for n in (layer.BASES_FILE, layer.READS_FILE))
        assert meta <= bound.bytes, f"{meta} bytes of records on the host for a {bound.bytes}-byte layer"
        assert r.limit == "upper_bytes", (r.exit_code, r.stderr[-500:])
    finally:
        ov.discard()


DEEP = "for i in $(seq 600); do mkdir dddddddd && cd dddddddd || break; done; pwd | wc -c"


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse"))
def test_a_tree_deeper_than_path_max_is_a_named_boundary(backend: str, project: Path) -> None:
    """Kernel overlayfs lets a command go deeper than PATH_MAX (relative mkdir and cd): the scans after it
    raised ENAMETOOLONG, uncaught. Now they walk by descriptor, and what the host cannot name is refused by
    name; our FUSE server refuses the mkdir past it."""
    _sandbox(backend)
    ov = Overlay(project)
    try:
        r = run_sandboxed(ov, DEEP, timeout=120, backend=backend)
        depth = int(r.stdout.split()[-1])
        if backend == "kernel":
            assert depth > 4096
            with pytest.raises(HostPathTooLong, match="deeper than the host can name") as e:
                ov.changes()
            assert e.value.errno == errno.ENAMETOOLONG
        else:
            assert depth < 4096 and "File name too long" in r.stderr
            assert len(ov.changes()) > 400
        r = run_sandboxed(ov, "cat README.md | head -1", timeout=60, backend=backend)  # the next one runs
        assert r.exit_code == 0, r.stderr
    finally:
        ov.discard()


@pytest.mark.privileged
def test_a_deep_tree_stops_speculative_bash_at_a_boundary(project: Path) -> None:
    from speculate.agent_types import BoundaryReached
    from speculate.speculation.guard import Protection
    from speculate.speculation.sandbox_shell import SandboxShell, bash_sandbox

    if not bash_sandbox("kernel").available:
        pytest.skip(f"speculative Bash on kernel is {bash_sandbox('kernel').line}")
    ov = Overlay(project)
    shell = SandboxShell(ov, "kernel", protection=Protection())

    async def main() -> None:
        with pytest.raises(BoundaryReached) as hit:
            await shell.run(DEEP, timeout=120)
        assert hit.value.kind == "resource" and hit.value.discard
        assert "deeper than the host can name" in hit.value.detail

    try:
        trio.run(main)
    finally:
        ov.discard()


def test_a_deep_but_short_tree_is_listed(project: Path, tmp_path: Path) -> None:
    """Two thousand levels of one-letter names fit in PATH_MAX but passed Python's recursion limit."""
    ov = Overlay(project, upper=tmp_path / "up")
    top = d = os.fspath(ov.upper)
    try:
        for _ in range(1500):
            d += "/x"
            os.mkdir(d)
        got = ov.changes()
        assert len(got) == 1500 and all(c.kind == "added" for c in got)
    finally:
        # Removed here, deepest first: pytest's later clean-up of old base temps (shutil.rmtree, recursive in
        # Python 3.11) would overflow on it, in whichever pytest runs next (a scenario's own test run).
        while d != top:
            os.rmdir(d)
            d = os.path.dirname(d)


_AT_FDCWD, _RENAME_WHITEOUT = -100, 4


@pytest.mark.fuse
def test_requests_on_unlinked_files_act_on_those_files(project: Path, overlay: Overlay) -> None:
    if os.geteuid() != 0:
        pytest.skip("xattrs on the mount root and RENAME_WHITEOUT (CAP_MKNOD) need root")
    require("fuse")
    libc = ctypes.CDLL(None, use_errno=True)
    mode_before = os.stat(project / "README.md").st_mode
    with mounted(overlay, "fuse") as root:
        os.setxattr(root, "user.root", b"y")
        (root / "f").write_text("f\n")
        os.setxattr(root / "f", "user.own", b"z")
        fd = os.open(root / "f", os.O_RDONLY)
        lower = os.open(root / "README.md", os.O_RDONLY)
        os.symlink("somewhere", root / "l")
        link = os.open(root / "l", os.O_PATH | os.O_NOFOLLOW)
        try:
            os.unlink(root / "f")
            os.unlink(root / "README.md")
            os.unlink(root / "l")
            assert os.listxattr(fd) == ["user.own"]  # not the root's
            assert os.readlink("", dir_fd=link) == "somewhere"
            with pytest.raises(OSError):
                os.fchmod(lower, 0o600)  # its kept descriptor is the real project's file
            assert os.pread(lower, 64, 0) == (project / "README.md").read_bytes()[:64]  # still readable
        finally:
            for x in (fd, lower, link):
                os.close(x)
        (root / "a").write_text("a")
        rc = libc.renameat2(
            _AT_FDCWD, os.fsencode(root / "a"), _AT_FDCWD, os.fsencode(root / "b"), _RENAME_WHITEOUT
        )
        assert rc == -1 and ctypes.get_errno() == errno.EINVAL  # was served as a plain rename
        assert (root / "a").exists() and not (root / "b").exists()
    assert os.stat(project / "README.md").st_mode == mode_before


@pytest.mark.slow
def test_no_wedge_as_a_normal_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("already a normal user: the tests above are this user's")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to a normal user")
    from tests.sandbox.test_escapes import _as_nobody, _code_paths

    base = Path(tempfile.mkdtemp(prefix="speculate-wedge-user-", dir="/var/lib"))
    try:
        paths = _code_paths(base)
        os.chown(base, NOBODY, NOBODY)
        probe = _as_nobody(
            "from overlayfs.mount import unavailable_reason; from overlayfs.sandbox import sandbox_problem; "
            "print(unavailable_reason('fuse') or sandbox_problem() or '')",
            base,
            paths,
        )
        if probe.returncode != 0 or probe.stdout.strip():
            pytest.skip(f"fuse unavailable to uid {NOBODY}: {probe.stdout.strip() or probe.stderr[-300:]}")
        r = _as_nobody(
            f"import os, sys; os.environ['SPECULATE_STATE_DIR'] = {os.fspath(base / 'state')!r}; "
            "from pathlib import Path; import json; from tests.mount.wedgekit import checks; "
            f"json.dump(checks(Path({os.fspath(base)!r})), sys.stdout)",
            base,
            paths,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        got = json.loads(r.stdout)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert not got["fifo"]["wedged"] and got["fifo"]["exit"] == 0, got["fifo"]
    assert not got["stuck"]["wedged"] and got["stuck"]["timed_out"], got["stuck"]
    assert "the view was aborted" in got["stuck"]["stderr"]
    assert not got["cancel"]["wedged"] and got["cancel"]["cancelled"] and got["cancel"]["after_cancel"] < 1.0
    assert got["next"] == {"exit": 0, "out": "a\n"}
