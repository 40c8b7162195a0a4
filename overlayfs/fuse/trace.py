"""Which requests a FUSE server received, one opcode name a line, whichever transport serves it: what the
kernel-contract tests (``tests/mount/test_transports.py``) count. Off unless the server's environment names a
file in :data:`TRACE_ENV`; then each request costs one ``write`` more.
"""

from __future__ import annotations

import os
from typing import Any

from overlayfs.fuse import wire
from overlayfs.fuse.server import Server

TRACE_ENV = "OVERLAYFS_FUSE_TRACE"

# The opcodes by name, as include/uapi/linux/fuse.h spells them (wire holds those this server speaks).
_NAMES = (
    "LOOKUP FORGET GETATTR SETATTR READLINK SYMLINK MKNOD MKDIR UNLINK RMDIR RENAME LINK OPEN READ WRITE "
    "STATFS RELEASE FSYNC SETXATTR GETXATTR LISTXATTR REMOVEXATTR FLUSH INIT OPENDIR READDIR RELEASEDIR "
    "FSYNCDIR ACCESS CREATE INTERRUPT DESTROY BATCH_FORGET READDIRPLUS RENAME2"
).split()
OPCODES = {getattr(wire, n): n for n in _NAMES if hasattr(wire, n)}


class Trace:
    """An append-only file of opcode names (``O_APPEND``: a reader may count while the server runs)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @classmethod
    def from_env(cls) -> Trace | None:
        path = os.environ.get(TRACE_ENV)
        return cls(path) if path else None

    def note(self, name: str) -> None:
        os.write(self.fd, name.encode() + b"\n")


class _TracedTable(dict[int, Any]):
    """The own server's dispatch table, noting each opcode the loop looks up (every request it reads
    except a READ its fast path answered, which :class:`TracedServer` notes)."""

    def __init__(self, table: dict[int, Any], trace: Trace) -> None:
        super().__init__(table)
        self.trace = trace

    def get(self, op: int, default: Any = None) -> Any:
        self.trace.note(OPCODES.get(op, f"OP{op}"))
        return super().get(op, default)


class TracedServer(Server):
    """The own transport's :class:`~overlayfs.fuse.server.Server`, noting every request it receives."""

    def __init__(self, ops: Any, fd: int, trace: Trace) -> None:
        super().__init__(ops, fd)
        self._trace = trace
        self._table = _TracedTable(self._table, trace)

    def _fast_read(self, unique: int, node: int, arg: memoryview) -> bool:
        done = super()._fast_read(unique, node, arg)
        if done:
            self._trace.note("READ")
        return done
