"""The own FUSE transport driven with crafted requests over a socket pair, no kernel in between: INIT's
version and refusals, every opcode it serves, truncated and malformed requests and unknown opcodes (an
error reply each, never a dead server), and the cases that wedged or misdirected it: a FIFO unlinked, the
records of churned names past the layer's bound, requests on unlinked files and removed directories, a
rename with RENAME_WHITEOUT, a plain READDIR."""

from __future__ import annotations

import errno
import os
import socket
import stat
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from overlayfs import layer
from overlayfs.bounded import BoundedLayer, LayerBound, LayerUnavailable, MiB
from overlayfs.errors import MountError
from overlayfs.fuse import wire
from overlayfs.fuse.ops import OverlayOps
from overlayfs.fuse.server import ProtocolRefused, Server

ROOT = 1
ALL_FLAGS = 0xFFFFFFFF & ~wire.INIT_EXT  # everything a kernel offers, the extension bit left out
SETXATTR_IN = struct.Struct("<II")
GETXATTR_IN = struct.Struct("<II")
RENAME2_IN = struct.Struct("<QII")
MKNOD_IN = struct.Struct("<IIII")
MKDIR_IN = struct.Struct("<II")
FSYNC_IN = struct.Struct("<QII")
FORGET_ONE = struct.Struct("<QQ")


@dataclass
class Client:
    """The kernel's side of a socket pair whose other end a :class:`Server` serves (in a thread)."""

    sock: socket.socket
    server: Server
    thread: threading.Thread
    failure: list[BaseException] = field(default_factory=list)
    unique: int = 100

    def send(self, op: int, node: int, arg: bytes = b"", *, length: int | None = None) -> int:
        self.unique += 2
        size = wire.IN_HEADER.size + len(arg)
        # The caller is this process's user (the server chowns what it makes to the caller: only root may
        # give it to another).
        ids = (os.geteuid(), os.getegid())
        self.sock.send(wire.IN_HEADER.pack(length or size, op, self.unique, node, *ids, 4242, 0, 0) + arg)
        return self.unique

    def reply(self, unique: int, timeout: float = 5.0) -> tuple[int, bytes]:
        """(errno, payload) of the reply to ``unique``."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(wire.BUFFER)
        length, error, got = wire.OUT_HEADER.unpack_from(data)
        assert got == unique and length == len(data), (got, unique, length, len(data))
        return -error, data[wire.OUT_HEADER.size :]

    def call(self, op: int, node: int, arg: bytes = b"", **kw: int) -> tuple[int, bytes]:
        return self.reply(self.send(op, node, arg, **kw))

    def ok(self, op: int, node: int, arg: bytes = b"") -> bytes:
        err, payload = self.call(op, node, arg)
        assert err == 0, f"opcode {op} answered {errno.errorcode.get(err, err)}"
        return payload

    def silent(self, timeout: float = 0.3) -> bool:
        """Whether no reply comes within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            self.sock.recv(wire.BUFFER)
        except TimeoutError:
            return True
        return False

    def alive(self) -> None:
        """The server still answers (a GETATTR of the root)."""
        assert self.thread.is_alive(), self.failure
        self.ok(wire.GETATTR, ROOT, bytes(16))

    # -- what requests carry ----------------------------------------------------------------------------
    def lookup(self, parent: int, name: bytes) -> int:
        return struct.unpack_from("<Q", self.ok(wire.LOOKUP, parent, name + b"\0"))[0]

    def mknod(self, parent: int, name: bytes, mode: int) -> int:
        return struct.unpack_from(
            "<Q", self.ok(wire.MKNOD, parent, MKNOD_IN.pack(mode, 0, 0, 0) + name + b"\0")
        )[0]


def init_arg(minor: int = 45, flags: int = ALL_FLAGS) -> bytes:
    return wire.INIT_IN.pack(7, minor, 1 << 17, flags, 0) + bytes(44)


def _layers(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    lower, upper, meta, work = (tmp_path / d for d in ("lower", "upper", "meta", "work"))
    for d in (lower, upper, meta, work):
        d.mkdir()
    (lower / "a.txt").write_text("lower a\n")
    (lower / "sub").mkdir()
    (lower / "sub" / "b.txt").write_text("b\n")
    return lower, upper, meta, work


def _start(ops: OverlayOps, *, init: bytes | None = None) -> Client:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = Server(ops, theirs.fileno(), init=False)
    client = Client(ours, server, threading.Thread())

    def serve() -> None:
        try:
            server.serve()
        except BaseException as e:  # what the test asserts on
            client.failure.append(e)
        finally:
            theirs.close()

    client.thread = threading.Thread(target=serve, daemon=True)
    client.thread.start()
    if init is not None:
        err, _ = client.call(wire.INIT, 0, init)
        assert err == 0
    return client


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    return _layers(tmp_path)


@pytest.fixture
def client(tree: tuple[Path, Path, Path, Path]) -> Iterator[Client]:
    c = _start(OverlayOps(*tree), init=init_arg())
    yield c
    c.sock.close()
    c.thread.join(5)


# -- INIT ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("offered", "agreed"), [(31, 31), (38, 38), (45, 45), (99, wire.MINOR)])
def test_init_answers_the_older_minor(tree: tuple[Path, Path, Path, Path], offered: int, agreed: int) -> None:
    c = _start(OverlayOps(*tree))
    err, payload = c.call(wire.INIT, 0, init_arg(offered))
    assert err == 0
    major, minor, _, flags, *_ = wire.INIT_OUT.unpack_from(payload)
    assert (major, minor) == (7, agreed) and c.server.minor == agreed
    assert not flags & wire.ATOMIC_O_TRUNC  # a truncating open must come as a SETATTR
    assert c.call(wire.INIT, 0, init_arg(offered))[0] == errno.EPROTO  # one INIT per connection
    c.alive()
    c.sock.close()


@pytest.mark.parametrize(
    ("minor", "flags", "named"),
    [
        (30, ALL_FLAGS, "7.31 or later"),
        (45, ALL_FLAGS & ~wire.NO_OPENDIR_SUPPORT, "without FUSE_NO_OPENDIR_SUPPORT"),
        (45, ALL_FLAGS & ~wire.NO_OPEN_SUPPORT, "without FUSE_NO_OPEN_SUPPORT"),
    ],
)
def test_init_refuses_a_kernel_the_design_cannot_serve(
    tree: tuple[Path, Path, Path, Path], minor: int, flags: int, named: str
) -> None:
    c = _start(OverlayOps(*tree))
    assert c.call(wire.INIT, 0, init_arg(minor, flags))[0] == errno.EPROTO
    c.thread.join(5)
    assert not c.thread.is_alive()
    [failure] = c.failure
    assert isinstance(failure, ProtocolRefused) and isinstance(failure, MountError)
    assert named in str(failure)
    c.sock.close()


def test_a_server_made_on_a_refusing_kernel_raises_before_serving(
    tree: tuple[Path, Path, Path, Path],
) -> None:
    """What the server process does before it says ``ready``: the owner then falls back (a MountError)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        ours.send(wire.IN_HEADER.pack(40 + 64, wire.INIT, 2, 0, 0, 0, 0, 0, 0) + init_arg(29))
        with pytest.raises(ProtocolRefused, match=r"7\.29"):
            Server(OverlayOps(*tree), theirs.fileno())
        _, error, unique = wire.OUT_HEADER.unpack_from(ours.recv(4096))
        assert (error, unique) == (-errno.EPROTO, 2)


# -- every opcode ----------------------------------------------------------------------------------------
def test_every_opcode_is_answered(client: Client, tree: tuple[Path, Path, Path, Path]) -> None:
    lower, upper, _, _ = tree
    a = client.lookup(ROOT, b"a.txt")
    assert client.ok(wire.GETATTR, a, bytes(16))
    assert client.ok(wire.READ, a, wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16)) == b"lower a\n"
    assert client.ok(wire.STATFS, ROOT)
    # Opened without asking: OPEN, OPENDIR, CREATE and FLUSH answer ENOSYS, which tells the kernel so.
    for op in (wire.OPEN, wire.OPENDIR, wire.CREATE, wire.FLUSH):
        assert client.call(op, a, bytes(16))[0] == errno.ENOSYS
    for op in (wire.RELEASE, wire.RELEASEDIR, wire.FSYNCDIR):
        assert client.call(op, a, bytes(24))[0] == 0
    d = struct.unpack_from("<Q", client.ok(wire.MKDIR, ROOT, MKDIR_IN.pack(0o755, 0) + b"d\0"))[0]
    f = client.mknod(d, b"f", stat.S_IFREG | 0o644)
    data = b"written\n"
    assert (
        struct.unpack_from(
            "<I", client.ok(wire.WRITE, f, wire.WRITE_IN.pack(0, 0, len(data), 0, 0, 0) + data)
        )[0]
        == 8
    )
    assert client.ok(wire.FSYNC, f, FSYNC_IN.pack(0, 0, 0)) == b""
    setattr_in = wire.SETATTR_IN.pack(wire.FATTR_MODE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0o600, 0, 0, 0, 0)
    assert stat.S_IMODE(wire.ATTR_OUT_ATTR.unpack_from(client.ok(wire.SETATTR, f, setattr_in))[12]) == 0o600
    client.ok(wire.SETXATTR, f, SETXATTR_IN.pack(1, 0) + b"user.k\0v")
    assert client.ok(wire.GETXATTR, f, GETXATTR_IN.pack(64, 0) + b"user.k\0") == b"v"
    assert client.ok(wire.LISTXATTR, f, GETXATTR_IN.pack(64, 0)) == b"user.k\0"
    client.ok(wire.REMOVEXATTR, f, b"user.k\0")
    link = struct.unpack_from("<Q", client.ok(wire.SYMLINK, d, b"l\0f\0"))[0]
    assert client.ok(wire.READLINK, link) == b"f"
    assert client.ok(wire.LINK, d, struct.pack("<Q", f) + b"g\0")
    client.ok(wire.RENAME, d, struct.pack("<Q", d) + b"g\0h\0")
    client.ok(wire.RENAME2, d, RENAME2_IN.pack(d, wire.RENAME_NOREPLACE, 0) + b"h\0i\0")
    client.ok(wire.UNLINK, d, b"i\0")
    assert {
        n
        for n, _ in _names(
            client.ok(wire.READDIRPLUS, d, wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16)), plus=True
        )
    } == {b"f", b"l"}
    assert {
        n for n, _ in _names(client.ok(wire.READDIR, ROOT, wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16)))
    } == {b"a.txt", b"sub", b"d"}
    for name in (b"l\0", b"f\0"):
        client.ok(wire.UNLINK, d, name)
    client.ok(wire.RMDIR, ROOT, b"d\0")
    # No answer to these: the kernel waits for none.
    client.send(wire.FORGET, a, struct.pack("<Q", 1))
    client.send(wire.BATCH_FORGET, 0, struct.pack("<II", 1, 0) + FORGET_ONE.pack(a, 1))
    client.send(wire.INTERRUPT, 0, struct.pack("<Q", 7))
    assert client.silent()
    assert (upper / "d").exists() is False and (lower / "a.txt").read_text() == "lower a\n"
    assert client.ok(wire.DESTROY, 0) == b""
    client.thread.join(5)
    assert not client.thread.is_alive() and not client.failure


def _names(payload: bytes, *, plus: bool = False) -> list[tuple[bytes, int]]:
    """(name, type) of each entry of a READDIR(PLUS) reply."""
    out, pos = [], 0
    while pos < len(payload):
        if plus:
            pos += wire.ENTRY_ATTR.size
        _, _, namelen, typ = wire.DIRENT.unpack_from(payload, pos)
        start = pos + wire.DIRENT.size
        out.append((payload[start : start + namelen], typ))
        pos = start + namelen + (-(wire.DIRENT.size + namelen) % 8)
    return out


def test_a_plain_readdir_lists_names_and_types_without_lookups(client: Client) -> None:
    entries = dict(_names(client.ok(wire.READDIR, ROOT, wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16))))
    assert entries == {b"a.txt": stat.S_IFREG >> 12, b"sub": stat.S_IFDIR >> 12}
    assert set(client.server.ops.tree.nodes) == {ROOT}  # no dentry made: nothing for the kernel to forget
    # A reply buffer too small for the second entry: the first only, then the next call from its offset.
    first = _names(client.ok(wire.READDIR, ROOT, wire.READ_IN.pack(0, 0, 32, 0) + bytes(16)))
    rest = _names(client.ok(wire.READDIR, ROOT, wire.READ_IN.pack(0, 1, 4096, 0) + bytes(16)))
    assert len(first) == 1 and {n for n, _ in first + rest} == {b"a.txt", b"sub"}


# -- what a kernel never sends, answered all the same ----------------------------------------------------
ARGS = {  # a well-formed argument per opcode, to be cut short
    wire.LOOKUP: b"a.txt\0",
    wire.SETATTR: bytes(wire.SETATTR_IN.size),
    wire.SYMLINK: b"x\0y\0",
    wire.MKNOD: MKNOD_IN.pack(stat.S_IFREG | 0o644, 0, 0, 0) + b"n\0",
    wire.MKDIR: MKDIR_IN.pack(0o755, 0) + b"m\0",
    wire.RENAME: struct.pack("<Q", ROOT) + b"a.txt\0z\0",
    wire.RENAME2: RENAME2_IN.pack(ROOT, 0, 0) + b"a.txt\0z\0",
    wire.LINK: struct.pack("<Q", 99) + b"k\0",
    wire.READ: wire.READ_IN.pack(0, 0, 16, 0) + bytes(16),
    wire.WRITE: wire.WRITE_IN.pack(0, 0, 4, 0, 0, 0) + b"data",
    wire.FSYNC: FSYNC_IN.pack(0, 0, 0),
    wire.SETXATTR: SETXATTR_IN.pack(1, 0) + b"user.k\0v",
    wire.GETXATTR: GETXATTR_IN.pack(64, 0) + b"user.k\0",
    wire.LISTXATTR: GETXATTR_IN.pack(64, 0),
    wire.INIT: init_arg(),
    wire.READDIR: wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16),
    wire.READDIRPLUS: wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16),
}


@pytest.mark.parametrize("op", sorted(ARGS), ids=lambda op: f"op{op}")
def test_a_truncated_request_gets_an_error_reply_and_the_server_goes_on(client: Client, op: int) -> None:
    arg = ARGS[op]
    for cut in sorted({0, 1, len(arg) // 2, len(arg) - 1}):
        err, _ = client.call(op, ROOT, arg[:cut])
        assert err != 0 or op in (wire.LOOKUP, wire.LISTXATTR), (op, cut)  # a shorter name may exist
        client.alive()


def test_malformed_requests_get_an_error_reply_and_the_server_goes_on(client: Client) -> None:
    assert client.call(9999, ROOT)[0] == errno.ENOSYS  # an opcode it does not know
    assert client.call(wire.ACCESS, ROOT, bytes(8))[0] == errno.ENOSYS
    assert client.call(wire.GETATTR, ROOT, bytes(16), length=1000)[0] == errno.EINVAL  # length disagrees
    assert client.call(wire.GETATTR, 123456, bytes(16))[0] == errno.ENOENT  # a node it never made
    assert client.call(wire.SYMLINK, ROOT, b"no-terminator")[0] == errno.EINVAL
    assert client.call(wire.GETXATTR, ROOT, GETXATTR_IN.pack(1, 0) + b"user.none\0")[0] == errno.ENODATA
    client.sock.send(b"\x01\x02\x03")  # shorter than a header: nothing to answer
    assert client.silent()
    client.send(wire.BATCH_FORGET, 0, struct.pack("<II", 1 << 30, 0))  # claims more than it carries
    client.send(wire.FORGET, 4242, b"")
    assert client.silent()
    client.alive()


# -- the cases that wedged or misdirected the server --------------------------------------------------
def test_unlinking_a_fifo_answers_at_once(client: Client, tree: tuple[Path, Path, Path, Path]) -> None:
    """It opened the FIFO to keep it readable: ``open(O_RDONLY)`` waited for a writer forever."""
    upper = tree[1]
    p = client.mknod(ROOT, b"p", stat.S_IFIFO | 0o644)
    assert stat.S_ISFIFO(os.lstat(upper / "p").st_mode)
    try:
        err, _ = client.call(
            wire.UNLINK,
            ROOT,
            b"p\0",
        )
        assert err == 0
        assert client.call(wire.GETATTR, p, bytes(16))[0] == 0  # its attributes as they were
        q = client.mknod(ROOT, b"q", stat.S_IFIFO | 0o644)
        client.mknod(ROOT, b"r", stat.S_IFREG | 0o644)
        assert client.call(wire.RENAME, ROOT, struct.pack("<Q", ROOT) + b"r\0q\0")[0] == 0  # over a FIFO
        assert q and stat.S_ISREG(os.lstat(upper / "q").st_mode)
        client.alive()
    finally:
        for name in ("p", "q"):  # a server stuck in open() of it (the old behaviour) is released
            try:
                os.close(os.open(upper / name, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass


def test_requests_on_an_unlinked_file_act_on_it_not_on_the_root(
    client: Client, tree: tuple[Path, Path, Path, Path]
) -> None:
    lower, upper, _, _ = tree
    client.ok(wire.SETXATTR, ROOT, SETXATTR_IN.pack(1, 0) + b"user.root\0y")
    f = client.mknod(ROOT, b"f", stat.S_IFREG | 0o644)
    client.ok(wire.SETXATTR, f, SETXATTR_IN.pack(1, 0) + b"user.own\0z")
    client.ok(wire.UNLINK, ROOT, b"f\0")
    assert client.ok(wire.LISTXATTR, f, GETXATTR_IN.pack(64, 0)) == b"user.own\0"
    assert client.call(wire.GETXATTR, f, GETXATTR_IN.pack(64, 0) + b"user.root\0")[0] == errno.ENODATA
    client.ok(wire.SETXATTR, f, SETXATTR_IN.pack(1, 0) + b"user.late\0w")  # on its kept upper file
    assert os.getxattr(upper, "user.root") == b"y" and "user.late" not in os.listxattr(upper)
    # A removed directory: nothing kept open, so ENOENT, never the root's.
    d = struct.unpack_from("<Q", client.ok(wire.MKDIR, ROOT, MKDIR_IN.pack(0o755, 0) + b"d\0"))[0]
    client.ok(wire.RMDIR, ROOT, b"d\0")
    assert client.call(wire.LISTXATTR, d, GETXATTR_IN.pack(64, 0))[0] == errno.ENOENT
    assert client.call(wire.SETXATTR, d, SETXATTR_IN.pack(1, 0) + b"user.x\0x")[0] == errno.ENOENT
    assert client.call(wire.READDIRPLUS, d, wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16))[0] == errno.ENOENT
    assert client.ok(wire.GETATTR, d, bytes(16))  # its attributes at removal (a shell's cwd)
    assert "user.x" not in os.listxattr(upper)
    # A removed symlink reads its own target, not the root's (which is no link).
    link = struct.unpack_from("<Q", client.ok(wire.SYMLINK, ROOT, b"l\0target\0"))[0]
    client.ok(wire.UNLINK, ROOT, b"l\0")
    assert client.ok(wire.READLINK, link) == b"target"
    # An unlinked lower file is changed through nothing: its kept descriptor is the real project's file.
    a = client.lookup(ROOT, b"a.txt")
    client.ok(wire.UNLINK, ROOT, b"a.txt\0")
    before = os.stat(lower / "a.txt")
    chmod = wire.SETATTR_IN.pack(wire.FATTR_MODE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0o600, 0, 0, 0, 0)
    assert client.call(wire.SETATTR, a, chmod)[0] == errno.ENOENT
    assert client.call(wire.SETXATTR, a, SETXATTR_IN.pack(1, 0) + b"user.x\0x")[0] == errno.ENOENT
    assert os.stat(lower / "a.txt").st_mode == before.st_mode and "user.x" not in os.listxattr(
        lower / "a.txt"
    )
    assert client.ok(wire.READ, a, wire.READ_IN.pack(0, 0, 4096, 0) + bytes(16)) == b"lower a\n"


def test_rename_whiteout_and_exchange_are_refused(
    client: Client, tree: tuple[Path, Path, Path, Path]
) -> None:
    upper = tree[1]
    client.mknod(ROOT, b"x", stat.S_IFREG | 0o644)
    for flags in (4, 2, 4 | 1, 1 << 7):  # RENAME_WHITEOUT, RENAME_EXCHANGE, with NOREPLACE, unknown
        arg = RENAME2_IN.pack(ROOT, flags, 0) + b"x\0y\0"
        assert client.call(wire.RENAME2, ROOT, arg)[0] == errno.EINVAL
    assert (upper / "x").exists() and not (upper / "y").exists()


def test_a_tree_deeper_than_the_host_can_name_is_refused_not_fatal(client: Client) -> None:
    node, depth = ROOT, 0
    while True:
        err, payload = client.call(wire.MKDIR, node, MKDIR_IN.pack(0o755, 0) + b"d" * 100 + b"\0")
        if err:
            break
        node, depth = struct.unpack_from("<Q", payload)[0], depth + 1
    assert err == errno.ENAMETOOLONG and 30 < depth < 45
    client.alive()


def test_churned_names_are_recorded_within_the_layer_bound(tree: tuple[Path, Path, Path, Path]) -> None:
    """Each new name is a base record in meta/ on the host disk: churning them once wrote 26 MB in 20 s
    while the upper layer stayed empty. Now each byte is reserved on the bounded layer first."""
    lower, _, meta, _ = tree
    bound = LayerBound(bytes=1 * MiB, inodes=1000)
    try:
        bl = BoundedLayer(bound)
    except LayerUnavailable as e:
        pytest.skip(f"no bounded layer here: {e}")
    c = _start(OverlayOps(lower, Path(bl.upper), meta, Path(bl.work)), init=init_arg())
    try:
        refused = None
        for i in range(20_000):
            name = f"{i:06d}".encode() + b"n" * 200
            err, payload = c.call(
                wire.MKNOD, ROOT, MKNOD_IN.pack(stat.S_IFREG | 0o644, 0, 0, 0) + name + b"\0"
            )
            if err:
                refused = err
                break
            node = struct.unpack_from("<Q", payload)[0]
            assert c.call(wire.UNLINK, ROOT, name + b"\0")[0] == 0
            c.send(wire.FORGET, node, struct.pack("<Q", 1))  # as the kernel does once the name is gone
        assert refused == errno.ENOSPC, f"{i} names churned, nothing refused"
        written = sum(os.stat(meta / n).st_size for n in (layer.BASES_FILE, layer.READS_FILE))
        assert 0.5 * MiB < written <= bound.bytes
        assert (meta / layer.REFUSED_FILE).exists()  # the sandbox's watch reads this
        assert os.listdir(bl.upper) == []
        c.alive()
    finally:
        c.sock.close()
        c.thread.join(5)
        bl.close()
