"""Fixtures for agent-loop and engine tests: a project tree plus a simulator serving an inline scenario."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree_hash(root: Path) -> str:
    """A hash of every path, mode and content under root (the real-tree leak check)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + sorted(dirnames):
            p = Path(dirpath, name)
            h.update(str(p.relative_to(root)).encode())
            if p.is_file() and not p.is_symlink():
                h.update(p.read_bytes())
    return h.hexdigest()


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root
