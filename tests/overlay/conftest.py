"""Fixtures for the overlay tests: a small real project tree and an overlay over it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from overlayfs import Overlay

TREE = {
    "README.md": b"# demo\n",
    "src/app.py": b"print('hello')\n",
    "src/util.py": b"def f():\n    return 1\n",
    "src/pkg/__init__.py": b"",
    "src/pkg/mod.py": b"X = 1\n",
    "docs/guide.txt": b"guide\n",
    "bin/run.sh": b"#!/bin/sh\necho run\n",
}


def make_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry under ``root``: path -> (type, content digest or link target or mode)."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if p.is_symlink():
                out[rel] = ("symlink", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", oct(st.st_mode & 0o7777))
            else:
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest() + oct(st.st_mode & 0o7777))
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    make_tree(root, TREE)
    (root / "bin/run.sh").chmod(0o755)
    return root


@pytest.fixture
def ov(project: Path) -> Iterator[Overlay]:
    o = Overlay(project)
    yield o
    o.discard()
