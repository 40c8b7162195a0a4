"""The root of speculate's own exceptions.

Every exception class defined in ``speculate`` (and ``bench``) derives from :class:`SpeculateError`, so a
caller can tell the project's errors and control-flow signals from a bug in a library or in Python. The
classes keep their old standard bases too (``ValueError`` for bad input, ``OSError`` for the overlay's),
so existing ``except`` clauses still match. ``overlayfs`` has no dependency on ``speculate``: its own root
is :class:`overlayfs.errors.OverlayError`.
"""

from __future__ import annotations


class SpeculateError(Exception):
    """Base of every exception speculate defines."""


class InternalError(SpeculateError, RuntimeError):
    """An invariant of speculate's own code broke: our bug, never the user's input or the model's. Raised
    where an ``assert`` would vanish under ``python -O`` and let the wrong thing happen quietly."""
