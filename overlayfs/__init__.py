"""overlayfs: a copy-on-write overlay of a project directory that every tool sees.

Owns the on-disk layer format (:mod:`overlayfs.layer`), the pure-Python merged view (:class:`Overlay`),
conflict-checked atomic promotion into the real tree under the rules of what acceptance lands
(:mod:`overlayfs.promote`, :mod:`overlayfs.conflicts`, :mod:`overlayfs.policy`) with its journal and crash
recovery (:mod:`overlayfs.journal`, :mod:`overlayfs.steps`, :mod:`overlayfs.stamps`,
:mod:`overlayfs.recovery`, per-project state in :mod:`overlayfs.state`), the mounted backends (FUSE, kernel
overlayfs) and the sandbox that runs untrusted commands against a mounted view (:mod:`overlayfs.sandbox`).
No dependency on :mod:`speculate`.
"""

from __future__ import annotations

from overlayfs.changes import Change
from overlayfs.journal import PromoteError, Unsettled
from overlayfs.paths import PathEscapeError
from overlayfs.promote import Conflict, PromoteResult
from overlayfs.recovery import Recovery, abandon_project, recover_all, recover_project
from overlayfs.state import ProjectLocked
from overlayfs.upper import OverlayStatistics
from overlayfs.view import Overlay


def available_backends() -> list[str]:
    """Backends ``Overlay.mounted()`` can use here, best first; ``"pure"`` (no mount) is always there."""
    try:
        from overlayfs.mount import available_backends as _available
    except ImportError:
        return ["pure"]
    return list(_available())


__all__ = [
    "Change",
    "Conflict",
    "Overlay",
    "OverlayStatistics",
    "PathEscapeError",
    "ProjectLocked",
    "PromoteError",
    "PromoteResult",
    "Recovery",
    "Unsettled",
    "abandon_project",
    "available_backends",
    "recover_all",
    "recover_project",
]
