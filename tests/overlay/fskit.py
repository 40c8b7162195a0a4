"""Small real filesystems for the integrity tests: a size-limited tmpfs mounted for a test (root only), filled
until a given number of bytes is left, and remounted read-only or writable on demand; and running a piece of
a test as a normal user (uid 65534)."""

from __future__ import annotations

import json
import os
import subprocess
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """Mount a tmpfs at ``where`` (created) with mount ``options``; skips the test when not root."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (CI runs as root)")
    where.mkdir(parents=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def remount(mnt: Path, mode: str) -> bool:
    """Remount ``mnt`` ``ro`` or ``rw``; False when the kernel refuses (EBUSY: a file open for writing)."""
    return subprocess.run(["mount", "-o", f"remount,{mode}", str(mnt)], capture_output=True).returncode == 0


def fill(mnt: Path, leave: int) -> None:
    """Fill the filesystem at ``mnt`` (with ``mnt/fill``) until about ``leave`` bytes are free."""
    with open(mnt / "fill", "ab") as f:
        while True:
            free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
            if free <= leave:
                return
            f.write(b"\0" * min(free - leave, 1 << 20))
            f.flush()


def free_space(mnt: Path) -> None:
    try:
        os.unlink(mnt / "fill")
    except FileNotFoundError:
        pass


NOBODY = 65534


def as_nobody(fn: Callable[[], dict]) -> dict:  # type: ignore[type-arg]
    """Run ``fn`` in a forked child as uid/gid 65534 (what it needs must be reachable by that user); return
    its JSON-able result, or {"unexpected": traceback}."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = fn()
        except BaseException:
            out = {"unexpected": traceback.format_exc()}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)  # type: ignore[no-any-return]
