"""Our FUSE server's two transports for one set of operations: the own ``/dev/fuse`` loop and pyfuse3 (libfuse).

Which one ``fuse`` chooses and how it says so, pinning one, the fall-back to pyfuse3 when the own one is
refused, and the kernel contract: the requests the kernel sends each transport for a stat, a read and a
listing, counted from the opcodes the server received (``OVERLAYFS_FUSE_TRACE``). The conformance and
escape suites run on both transports through ``tests.mount.conftest.backend_params``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from overlayfs import backends
from overlayfs.backends import TRANSPORT_ENV, FuseBackend
from overlayfs.fuse.trace import TRACE_ENV
from overlayfs.mount import Mount, MountError, open_mount
from overlayfs.view import Overlay
from tests.mount.conftest import require

REPO = Path(__file__).resolve().parents[2]
TRANSPORT = pytest.mark.parametrize(
    "transport", [pytest.param(t, marks=pytest.mark.fuse) for t in backends.TRANSPORTS]
)
# What every answer may bring besides the action: the barrier, and forgets the kernel sends when it likes.
NOT_COUNTED = {"STATFS", "FORGET", "BATCH_FORGET"}


def _require(transport: str) -> None:
    require("fuse")
    if transport == "pyfuse3":
        require("fuse-pyfuse3")


@pytest.fixture
def lower(tmp_path: Path) -> Path:
    root = tmp_path / "lower"
    root.mkdir()
    for name in ("warm.txt", "stat.txt", "read.txt", "read2.txt"):
        (root / name).write_bytes(b"0123456789")
    for d in ("warmdir", "listed", "listed2"):
        (root / d).mkdir()
        for i in range(5):
            (root / d / f"f{i}").write_bytes(b"x")
    return root


@pytest.fixture
def mounted_on(
    lower: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], tuple[Mount, Path]]]:
    opened: list[Mount] = []

    def mount(transport: str) -> tuple[Mount, Path]:
        trace = tmp_path / f"trace-{transport}"
        monkeypatch.setenv(TRACE_ENV, os.fspath(trace))
        monkeypatch.setenv(TRANSPORT_ENV, transport)
        m = open_mount(Overlay(lower, upper=tmp_path / f"layers-{transport}" / "upper"), "fuse")
        opened.append(m)
        return m, trace

    yield mount
    for m in opened:
        m.close()


class Tally:
    """The requests the server received for each action: those up to a STATFS sent after it (the kernel
    sends requests in order, and the server notes each one before answering it)."""

    def __init__(self, root: Path, trace: Path) -> None:
        self.root, self.trace, self.seen = root, trace, 0
        self.after(lambda: None)  # what mounting brought

    def after(self, action: Callable[[], object]) -> dict[str, int]:
        action()
        os.statvfs(self.root)
        names = self.trace.read_text().split()
        new, self.seen = names[self.seen :], len(names)
        assert new and new[-1] == "STATFS", new
        return dict(Counter(n for n in new if n not in NOT_COUNTED))


def _read(path: Path) -> Callable[[], bytes]:
    def read() -> bytes:  # os-level: no isatty ioctl, no fstat
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.read(fd, 100)
        finally:
            os.close(fd)

    return read


# What the kernel (6.x, with the INIT each transport answers) sends; first time anything is opened aside.
CONTRACT = {
    "own": {
        "stat": {"LOOKUP": 1},
        "stat again": {},
        "read": {"LOOKUP": 1, "READ": 1},
        "read again": {},
        "read another": {"LOOKUP": 1, "READ": 1},
        "list": {"LOOKUP": 1, "READDIRPLUS": 2},
        "list again": {"GETATTR": 1},  # the listing is cached; its atime was dropped by the first
    },
    "pyfuse3": {
        "stat": {"LOOKUP": 1},
        "stat again": {},
        "read": {"LOOKUP": 1, "OPEN": 1, "READ": 1, "RELEASE": 1},
        "read again": {"OPEN": 1, "RELEASE": 1},  # pages kept (keep_cache): no READ
        "read another": {"LOOKUP": 1, "OPEN": 1, "READ": 1, "RELEASE": 1},
        "list": {"LOOKUP": 1, "OPENDIR": 1, "READDIRPLUS": 2, "RELEASEDIR": 1},
        "list again": {"OPENDIR": 1, "GETATTR": 1, "READDIRPLUS": 2, "RELEASEDIR": 1},
    },
}


@TRANSPORT
def test_kernel_contract_a_stat_a_read_and_a_listing(
    transport: str, mounted_on: Callable[[str], tuple[Mount, Path]]
) -> None:
    """The requests the kernel sends for each action, transport by transport: the own transport's design
    (no OPEN, OPENDIR, RELEASE; cached pages and listings) holds only if the kernel keeps to it."""
    _require(transport)
    m, trace = mounted_on(transport)
    fuse = backends.get("fuse")
    assert isinstance(fuse, FuseBackend) and fuse.transport == transport
    root = m.root
    t = Tally(root, trace)
    # Warm-up: the first open and listing (the own transport's ENOSYS answers, sent once), a FLUSH.
    assert _read(root / "warm.txt")() == b"0123456789"
    first_list = t.after(lambda: os.listdir(root / "warmdir"))
    assert first_list.get("READDIRPLUS", 0) >= 1, first_list
    got = {
        "stat": t.after(lambda: os.stat(root / "stat.txt")),
        "stat again": t.after(lambda: os.stat(root / "stat.txt")),
        "read": t.after(_read(root / "read.txt")),
        "read again": t.after(_read(root / "read.txt")),
        "read another": t.after(_read(root / "read2.txt")),
        "list": t.after(lambda: os.listdir(root / "listed")),
        "list again": t.after(lambda: os.listdir(root / "listed")),
    }
    assert got == CONTRACT[transport]
    # The own transport's point, in requests: a first read is one request (READ) after the lookup, not three.
    if transport == "own":
        assert sum(got["read another"].values()) == 2


@pytest.mark.fuse
def test_fuse_chooses_a_transport_and_says_which(project: Path, overlay: Overlay) -> None:
    """Unpinned, ``fuse`` takes the own transport where the kernel offers what it needs (it refuses with a
    MountError where it does not, and pyfuse3 serves), and says which: on the backend, in what a sandboxed
    run reports as enforced, and on the server's command line."""
    require("fuse")
    b = backends.get("fuse")
    assert isinstance(b, FuseBackend)
    if os.environ.get(TRANSPORT_ENV):
        pytest.skip(f"{TRANSPORT_ENV} pins the transport here")
    m = open_mount(overlay, "fuse")
    try:
        assert m.backend == "fuse"
        assert b.transport == ("own" if b.own_refused is None else "pyfuse3")
        assert f"transport: {b.transport}" in b.enforces
        assert m._proc is not None
        argv = Path(f"/proc/{m._proc.pid}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"--transport") + 1] == b.transport.encode()
        (m.root / "x.txt").write_text("through the mount\n")
    finally:
        m.close()
    assert overlay.read_text("x.txt") == "through the mount\n"


@pytest.mark.fuse
def test_a_refused_transport_falls_back_to_pyfuse3(project: Path, overlay: Overlay) -> None:
    """A transport whose server does not come up (here one its command line rejects, as the own transport
    is refused on a kernel without FUSE 7.31's NO_OPEN support) leaves the mount to pyfuse3, which serves
    it; the refusal is named and later mounts go straight to pyfuse3."""
    require("fuse-pyfuse3")

    class Refused(FuseBackend):
        name = "fuse"

        def transports(self) -> tuple[str, ...]:
            return ("pyfuse3",) if self.own_refused else ("refused-here", "pyfuse3")

    b = Refused()
    root = overlay.metadir.parent / "mnt"
    root.mkdir()
    started = b.start(overlay, root, snapshot=False)
    try:
        assert started.transport == b.transport == "pyfuse3"
        assert b.own_refused is not None and "refused-here transport" in b.own_refused
        assert "the own transport was refused" in b.enforces
        assert b.transports() == ("pyfuse3",)
        (root / "y.txt").write_text("served by pyfuse3\n")
    finally:
        b.unmount(root)
        assert started.proc is not None
        started.proc.kill()
        started.proc.wait()
        if started.control is not None:
            started.control.close()
    assert overlay.read_text("y.txt") == "served by pyfuse3\n"


def test_the_transport_can_be_pinned_and_a_bad_pin_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    b = backends.get("fuse")
    assert isinstance(b, FuseBackend)
    monkeypatch.setenv(TRANSPORT_ENV, "pyfuse3")
    assert b.transports() == ("pyfuse3",)
    monkeypatch.setenv(TRANSPORT_ENV, "own")
    assert b.transports() == ("own",)
    pinned = backends.get("fuse-pyfuse3")
    assert isinstance(pinned, FuseBackend) and pinned.transports() == ("pyfuse3",)
    monkeypatch.setenv(TRANSPORT_ENV, "libfuse2")
    why = b.unavailable_reason()
    assert why is not None and "SPECULATE_FUSE_TRANSPORT='libfuse2'" in why
    with pytest.raises(MountError, match="expected own, pyfuse3 or auto"):
        backends.choose_backend("fuse")


def test_without_pyfuse3_the_own_transport_alone_is_tried_and_the_reason_is_kept() -> None:
    """An interpreter that cannot import pyfuse3 (no site-packages: where set-up could not build it) names
    why ``fuse-pyfuse3`` is unavailable (set-up's note when it left one) and tries the own transport only."""
    probe = (
        "from overlayfs import backends as b\n"
        "print(b.pyfuse3_problem())\n"
        "print(b.get('fuse-pyfuse3').unavailable_reason())\n"
        "print(b.get('fuse').transports())\n"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {os.fspath(REPO)!r})\n{probe}"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != TRANSPORT_ENV},
    ).stdout.splitlines()
    assert out[0].startswith("pyfuse3 is not installed")
    assert out[1] == out[0] or out[1].startswith("/dev/fuse") or "fusermount3" in out[1]
    assert out[2] == "('own',)"
