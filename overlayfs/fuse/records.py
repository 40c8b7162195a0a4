"""What the FUSE server appends to the overlay's ``meta/`` (the conflict bases, the read set), counted against
the upper layer's bound.

A bounded overlay keeps ``meta/`` on the host's disk, beside the tmpfs its upper layer lives on, and every
new name a command makes is one base record there (absent in the real tree: creating and removing it again
is still a change of that path). A command churning new names would so write to the host without bound
while its upper layer stayed empty. So each byte appended is also reserved on the layer's own filesystem: a
file in its work dir (:data:`RESERVE_FILE`) held at the size ``meta/``'s records have, grown ahead in
:data:`CHUNK` steps. Past the bound the reservation, and with it the request that needed the record, fails
with ENOSPC like any write, and the sandbox sees the layer full. Where ``meta/`` is on the layer's own
filesystem (an unbounded overlay) its bytes count there already and nothing is reserved.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from overlayfs import layer

RESERVE_FILE = "meta-reserve"
CHUNK = 64 << 10


class Reservation:
    """Room held on the upper layer's filesystem for the bytes ``meta/`` holds on another one."""

    def __init__(self, metadir: Path, upper: str, work: str | None) -> None:
        self.fd, self.held, self.used = -1, 0, 0
        try:
            if work is None or os.stat(metadir).st_dev == os.stat(upper).st_dev:
                return
            fd = os.open(
                f"{work}/{RESERVE_FILE}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
            )
        except OSError:
            return
        self.fd, self.held = fd, os.fstat(fd).st_size  # an earlier server of the same layer held this
        for name in (layer.BASES_FILE, layer.READS_FILE):  # what is there already counts too
            with contextlib.suppress(OSError):
                self.used += os.stat(metadir / name).st_size
        with contextlib.suppress(OSError):  # a layer full already: the first record will say so
            self._hold(self.used)

    def grow(self, n: int) -> None:
        """Account ``n`` more bytes of ``meta/``; raises OSError (ENOSPC) where the layer has no room."""
        need = self.used + n
        if need > self.held and self.fd >= 0:
            self._hold(need)
        self.used = need

    def _hold(self, need: int) -> None:
        size = -(-need // CHUNK) * CHUNK
        if size > self.held:
            os.posix_fallocate(self.fd, 0, size)
            self.held = size


class Records:
    """The server's appends to ``meta/``: one kept descriptor per file (a first read or change costs one
    ``write``, not an open, a write and a close), each line reserved first."""

    def __init__(self, metadir: Path, upper: str, work: str | None) -> None:
        self.reservation = Reservation(metadir, upper, work)
        self._fds = {
            name: os.open(metadir / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            for name in (layer.READS_FILE, layer.BASES_FILE)
        }

    def append(self, name: str, ident: layer.Identity) -> None:
        """Append ``ident``'s record to ``meta/<name>``; OSError (ENOSPC) if the layer cannot hold it."""
        line = layer.identity_line(ident)
        self.reservation.grow(len(line))
        os.write(self._fds[name], line)
