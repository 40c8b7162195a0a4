"""Temporary files a speculate process makes, named after it, and removed on the next start once it is gone.

A process killed with SIGKILL (or a machine that lost power) cannot remove what it made in ``$TMPDIR``: a
session's spill directory, the REPL's, the demo's project copy, a benchmark's project copies, the MCP
servers' stderr log. Every such name carries its owner's pid (``speculate-spill-1234-x8k2…``), so the next
REPL, benchmark or ``speculate recover`` (:func:`clean_stale`) removes those whose owner no longer runs
(nothing that is mounted, and nothing of a live process, is touched). An MCP log of a dead owner is kept
for a day when it holds something (a failing server's log, which a note pointed at), else removed. Names
from before owners were recorded (``speculate-spill-x8k2abcd``) are removed once a day old.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("spill", "repl-spill", "demo", "bench", "check", "claude-cli", "mcp")
KEEP_LOGS_S = 24 * 3600
_OWNED = re.compile(rf"^speculate-({'|'.join(KINDS)})-(\d+)-[a-z0-9_]+(\.log)?$")
_LEGACY = re.compile(rf"^speculate-({'|'.join(KINDS)})-[a-z0-9_]{{8}}(\.log)?$")


def _check(kind: str) -> None:
    if kind not in KINDS:  # a name the start-up cleanup would never look for: the files would pile up
        raise ValueError(f"temporary file kind {kind!r} is not one of {', '.join(KINDS)}")


def temp_dir(kind: str) -> Path:
    """A new directory in ``$TMPDIR`` named for ``kind`` and this process."""
    _check(kind)
    return Path(tempfile.mkdtemp(prefix=f"speculate-{kind}-{os.getpid()}-"))


def temp_file(kind: str, suffix: str = "") -> tuple[int, str]:
    """A new file (``mkstemp``: an open fd and its path) named for ``kind`` and this process."""
    _check(kind)
    return tempfile.mkstemp(prefix=f"speculate-{kind}-{os.getpid()}-", suffix=suffix)


@dataclass
class Cleaned:
    paths: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.paths)

    def line(self) -> str:
        n = len(self.paths)
        shown = ", ".join(Path(p).name for p in self.paths[:3]) + (f" +{n - 3} more" if n > 3 else "")
        return (
            f"removed {n} temporary file{'s' * (n != 1)} of speculate processes that are gone "
            f"({shown}) from {Path(self.paths[0]).parent}"
        )


def clean_stale(root: Path | None = None, *, now: float | None = None) -> Cleaned:
    """Remove the temporary files of speculate processes that no longer run (see the module docstring)."""
    base = Path(root or tempfile.gettempdir())
    now = time.time() if now is None else now
    out = Cleaned()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return out
    mounted = _mount_points()
    for e in entries:
        if not e.name.startswith("speculate-"):
            continue
        owned, legacy = _OWNED.match(e.name), _LEGACY.match(e.name)
        if owned is None and legacy is None:
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if owned is not None and _alive(int(owned.group(2))):
            continue
        age = now - st.st_mtime
        if owned is None and age < KEEP_LOGS_S:
            continue
        if e.name.endswith(".log") and e.is_file(follow_symlinks=False):
            if st.st_size and age < KEEP_LOGS_S:
                continue
            _remove(Path(e.path), out)
        elif e.is_dir(follow_symlinks=False) and not any(
            m == e.path or m.startswith(e.path + "/") for m in mounted
        ):
            _remove(Path(e.path), out)
    return out


def _alive(pid: int) -> bool:
    return pid == os.getpid() or os.path.exists(f"/proc/{pid}")


def _remove(path: Path, out: Cleaned) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError:
        return  # another process's, or half removed already: the next start tries again
    out.paths.append(str(path))


def _mount_points() -> list[str]:
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return []
    # Fields are space-separated with spaces and backslashes octal-escaped.
    return [
        re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split(" ")[1])
        for line in text.splitlines()
        if len(line.split(" ")) > 1
    ]
