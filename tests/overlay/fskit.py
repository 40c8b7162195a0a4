"""Small real filesystems for the integrity tests: a size-limited tmpfs mounted for a test (root only), filled
until a given number of bytes is left, and remounted read-only or writable on demand."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """Mount a tmpfs at ``where`` (created) with mount ``options``; skips the test when not root."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (CI runs as root)")
    where.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                       text=True)
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
