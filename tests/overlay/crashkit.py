"""Crash points for promotion tests: stop a promotion (or a recovery) just before its k-th filesystem
mutation, as a SIGKILL would (or do something else there, such as remounting read-only), and compare whole
trees (types, modes, bytes, link targets)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# Every call that changes a filesystem (or makes it durable) in the promotion and recovery code paths.
MUTATORS = (
    "rename",
    "replace",
    "unlink",
    "rmdir",
    "mkdir",
    "chmod",
    "link",
    "symlink",
    "open",
    "copy_file_range",
    "write",
    "fsync",
    "ftruncate",
)


class Crash(BaseException):
    """Not an Exception: promotion's error handling must not see it, just as it would not see SIGKILL."""


@contextmanager
def crash_at(k: int | None, then: Callable[[], object] | None = None) -> Iterator[list[int]]:
    """Count mutating os calls (and renameat2, which os lacks); raise Crash instead of performing call
    number ``k`` (0-based; None: never). With ``then``, call it once before call ``k`` instead of crashing
    (e.g. remount the filesystem read-only there) and go on.

    Yields a one-item list holding the number of calls made so far."""
    from overlayfs import stamps

    count = [0]
    lock = threading.Lock()
    inside = threading.local()
    saved = {name: getattr(os, name) for name in MUTATORS}
    saved_renameat2 = stamps.renameat2

    def wrap(name: str, real: Callable[..., object]):  # type: ignore[no-untyped-def]
        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            if threading.current_thread().name == "overlayfs-dispose":
                return real(*args, **kwargs)  # deleting spent layers in the background: garbage either way
            if name == "open" and not (args[1] if len(args) > 1 else kwargs.get("flags", 0)) & (
                os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_RDWR
            ):
                return real(*args, **kwargs)  # reading changes nothing
            if getattr(inside, "then", False):
                return real(*args, **kwargs)  # what ``then`` itself does is not counted
            with lock:  # fsyncs run on a thread pool
                if count[0] == k:
                    if then is None:
                        raise Crash(f"crash before {name}{args[:2]}")
                    inside.then = True
                    try:
                        then()
                    finally:
                        inside.then = False
                count[0] += 1
            return real(*args, **kwargs)

        return call

    for name in MUTATORS:
        setattr(os, name, wrap(name, saved[name]))
    stamps.renameat2 = wrap("renameat2", saved_renameat2)  # type: ignore[assignment]
    try:
        yield count
    finally:
        for name, fn in saved.items():
            setattr(os, name, fn)
        stamps.renameat2 = saved_renameat2  # type: ignore[assignment]


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (the root's own mode too): kind, mode bits, content digest or link target."""
    out = {".": f"dir {os.lstat(root).st_mode & 0o7777:o}"}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            mode = f"{st.st_mode & 0o7777:o}"
            if os.path.islink(p):
                out[rel] = f"link {os.readlink(p)}"
            elif os.path.isdir(p):
                out[rel] = f"dir {mode}"
            else:
                with open(p, "rb") as f:
                    out[rel] = f"file {mode} {hashlib.sha256(f.read()).hexdigest()}"
    return out


def temps(root: Path) -> list[str]:
    """Our temp, backup and trash names left anywhere under ``root``."""
    return [os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs if n.endswith(".ovl-tmp")]


def diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def interrupt_promotion(root: Path, path: str, data: bytes, state: str) -> None:
    """Leave a promotion of ``path`` -> ``data`` crashed with its journal in ``state`` (prepare or commit);
    the overlay is discarded, as a sweep would remove a dead process's."""
    from overlayfs import Overlay
    from overlayfs.journal import read
    from overlayfs.state import project_state

    old = (root / path).read_bytes()
    for k in range(100):
        ov = Overlay(root)
        ov.write_bytes(path, data)
        try:
            with crash_at(k):
                ov.promote()
        except Crash:
            j = read(project_state(root).journal)
            if j is not None and j["state"] == state:
                ov.discard()
                return
        ov.discard()
        (root / path).write_bytes(old)
    raise AssertionError(f"no crash point left a {state} journal")
