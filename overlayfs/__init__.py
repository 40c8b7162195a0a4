"""overlayfs: a copy-on-write overlay of a project directory that every tool sees.

Owns the on-disk layer format (:mod:`overlayfs.layer`), the pure-Python merged view (:class:`Overlay`),
conflict-checked atomic promotion into the real tree, and the mounted backends (FUSE, kernel overlayfs).
No dependency on :mod:`speculate`.
"""

from overlayfs.paths import PathEscapeError

__all__ = ["PathEscapeError"]
