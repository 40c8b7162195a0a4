"""The overlay a speculative fork writes, bounded: :func:`fork_overlay` makes it with the sandbox's upper-layer
bound (the same layer its Bash commands write, see docs/security.md), and :class:`BoundedWrites` is the
file tools' view of it, on which a write the full layer refuses stops the fork at ``resource``."""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from speculate.agent_types import BoundaryReached

# The overlay's methods that write its upper layer (open() for writing is not used by the tools).
WRITES = frozenset(
    {"write_bytes", "write_text", "mkdir", "unlink", "rmdir", "rmtree", "rename", "chmod", "symlink"}
)


def fork_overlay(project: Path, limits: Any = None) -> Any:
    """A fresh overlay of ``project`` whose upper layer is bounded by ``limits`` (a SandboxLimits, None:
    the defaults). Where no bounded layer can be made (no fsopen, no user namespaces: then there is no
    sandbox for Bash either), an unbounded one, which only the file tools write."""
    from overlayfs import Overlay
    from overlayfs.bounded import LayerUnavailable
    from overlayfs.sandbox import SandboxLimits

    try:
        return Overlay(lower=project, bound=(limits or SandboxLimits()).layer_bound())
    except LayerUnavailable:
        return Overlay(lower=project)


class BoundedWrites:
    """``overlay`` as the file tools see it in a fork; everything passes through, except that a write the
    bounded upper layer refuses as full (ENOSPC, EDQUOT) is a ``resource`` boundary, as for Bash."""

    def __init__(self, overlay: Any) -> None:
        self._overlay = overlay

    @property
    def root(self) -> Path:
        return self._overlay.root

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._overlay, name)
        if name not in WRITES:
            return attr
        return self._stopping(name, attr)

    def _stopping(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                bound = getattr(self._overlay, "bound", None)
                what = f" of {bound.bytes} bytes, {bound.inodes} inodes" if bound is not None else ""
                raise BoundaryReached(
                    "resource",
                    f"{name} {e.filename or ''}: the speculation's upper layer "
                    f"reached its bound{what} ({e.strerror})",
                ) from e

        return call

    def __repr__(self) -> str:
        return f"BoundedWrites({self._overlay!r})"
