"""The root of the overlay package's own exceptions (``overlayfs`` depends on nothing in ``speculate``).

Every exception class defined in ``overlayfs`` derives from :class:`OverlayError` and keeps its standard
base (``OSError`` for mount and promotion failures, ``PermissionError`` for a path that escapes the tree),
so ``except OSError`` still matches them.
"""

from __future__ import annotations


class OverlayError(Exception):
    """Base of every exception the overlay package defines."""


class MountError(OverlayError, OSError):
    """A backend is unavailable here, or mounting failed; the message says which and why."""


class HostPathTooLong(OverlayError, OSError):
    """The overlay holds a path longer than the host can name (PATH_MAX): it can be neither shown nor
    promoted. A boundary, named: raised by the scans that feed promotion (:mod:`overlayfs.changes`)."""
