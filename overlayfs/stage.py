"""The compiled stage program (``stage.c``): where it is, building it once, and the command lines that use it.

Entering the sandbox takes two small stages around bubblewrap: stage one on the host (join the command's
cgroups, mount the kernel overlay in a private namespace) and the inner stage inside (rlimits, Landlock).
Each was a Python interpreter (``overlayfs/_nsexec.py``, ``_inner.py``): ~20 ms apiece on this machine,
most of a command's start-up. ``stage.c`` does both in well under a millisecond. It is compiled with the
system C compiler the first time it is needed (``scripts/setup.sh`` does it at set-up) into a file named
by the hash of its source, next to the source or, where that directory is not writable, in a private
per-user cache directory; where no compiler is at hand the Python stages are used instead, and
:func:`stage_program` says so (``None``).

``python -m overlayfs.stage`` builds it and prints its path.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

SOURCE = Path(__file__).with_name("stage.c")
ENV_OFF = "SPECULATE_PYTHON_STAGES"  # set to 1: use the Python stages (tests compare the two)


def _digest() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]


def _candidates(name: str) -> list[Path]:
    cache = Path(tempfile.gettempdir()) / f"speculate-stage-{os.geteuid()}"
    return [SOURCE.with_name(name), cache / name]


def _usable(p: Path) -> bool:
    try:
        st, dst = p.stat(), p.parent.stat()
    except OSError:
        return False
    # The file and its directory ours (or root's) and writable by no one else: root runs it.
    return all(s.st_uid in (0, os.geteuid()) and not s.st_mode & 0o022 for s in (st, dst)) and os.access(
        p, os.X_OK
    )


def _build(out: Path) -> bool:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return False
    try:
        out.parent.mkdir(mode=0o700, exist_ok=True)
        if out.parent.stat().st_uid != os.geteuid():
            return False  # a cache directory someone else made
        fd, tmp = tempfile.mkstemp(prefix=".stage-", dir=out.parent)
        os.close(fd)
    except OSError:
        return False
    try:
        r = subprocess.run(
            [cc, "-O2", "-Wall", "-o", tmp, os.fspath(SOURCE)], capture_output=True, timeout=120
        )
        if r.returncode != 0:
            return False
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)  # atomic: a concurrent build wins or loses whole
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    for old in out.parent.glob("_stage-*"):  # builds of earlier sources
        if old != out:
            with contextlib.suppress(OSError):
                old.unlink()
    return True


@functools.cache
def stage_program() -> str | None:
    """The compiled stage program's path (built now if needed), or None: use the Python stages."""
    if os.environ.get(ENV_OFF) == "1":
        return None
    try:
        name = f"_stage-{_digest()}"
    except OSError:
        return None
    places = _candidates(name)
    for p in places:
        if _usable(p):
            return os.fspath(p)
    for p in places:
        if _build(p) and _usable(p):
            return os.fspath(p)
    return None


def outer_argv(
    program: str,
    *,
    cgroups: Sequence[str] = (),
    overlay: dict[str, str] | None = None,
    target: str = "",
    attach: tuple[str, str] | None = None,
    handoff: int | None = None,
    userns: int | None,
    close: list[int],
    argv: list[str],
    map_ids: bool = False,
) -> list[str]:
    """Stage one: join ``cgroups``; in a private mount namespace (joining ``userns`` first), mount
    ``overlay`` (lowerdir, upperdir, workdir) at ``target`` or clone the mount ``attach[0]`` onto
    ``attach[1]`` and take a descriptor on the socket ``handoff`` for ``{fd}`` in ``argv``; close
    ``close``; with ``map_ids``, go on in a user namespace mapping every id (root on another user's
    project, :func:`overlayfs.sandbox.policy.runs_mapped`); exec ``argv``."""
    a = [program]
    for procs in cgroups:
        a += ["-c", procs]
    if overlay is not None or attach is not None:
        a += ["-U", str(userns)] if userns is not None else ["-n"]
    if overlay is not None:
        a += ["-o", target, overlay["lowerdir"], overlay["upperdir"], overlay["workdir"]]
    if attach is not None:
        a += ["-a", *attach]
    if handoff is not None:
        a += ["-h", str(handoff)]
    for fd in close:
        a += ["-x", str(fd)]
    if map_ids:
        a += ["-m"]
    return [*a, "--", *argv]


def inner_argv(
    program: str, *, rlimits: dict[str, int], landlock: int, writable: list[str], argv: list[str]
) -> list[str]:
    """The inner stage: set ``rlimits``, restrict writes to ``writable`` with Landlock ``landlock``, exec."""
    a = [program]
    for name, value in rlimits.items():
        a += ["-r", f"{name}={value}"]
    for p in writable:
        a += ["-w", p]
    return [*a, "-l", str(landlock), "--", *argv]


if __name__ == "__main__":
    got = stage_program()
    print(got or "no C compiler: the Python stages are used")
    sys.exit(0 if got else 1)
