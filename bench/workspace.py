"""Per-session project copies and the canary hashes that prove speculation never leaks into a real tree."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

from speculate.sim.scenario import Scenario

# Caches the agent's own commands create; ignored only when comparing the two arms' final trees.
CACHE_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"})

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "speculate-bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "speculate-bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def prepare_workspace(scenario: Scenario, dest: Path) -> Path:
    """Materialize the scenario into ``dest`` and make it a git repo with one commit (if it is not one). Its
    identity is the repository's own, so that a scenario's ``git commit`` works (and every arm commits alike)
    for a user without one of their own (uid 65534, a CI account)."""
    root = scenario.materialize(dest)
    if not (root / ".git").exists():
        env = {**os.environ, **_GIT_ENV}
        for cmd in (
            ["git", "init", "-q", "-b", "main"],
            ["git", "add", "-A"],
            ["git", "commit", "-q", "--no-gpg-sign", "-m", "initial", "--allow-empty"],
            ["git", "config", "user.name", _GIT_ENV["GIT_AUTHOR_NAME"]],
            ["git", "config", "user.email", _GIT_ENV["GIT_AUTHOR_EMAIL"]],
        ):
            subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    return root


def manifest(root: Path, *, skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """Relative path -> digest of (kind, mode bits, content or link target), for every entry under root."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        base = Path(dirpath)
        for name in sorted([*filenames, *(d for d in dirnames if (base / d).is_symlink())]):
            p = base / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            h = hashlib.sha256()
            if stat.S_ISLNK(st.st_mode):
                h.update(b"L" + os.readlink(p).encode())
            else:
                h.update(b"F%o" % stat.S_IMODE(st.st_mode))
                h.update(p.read_bytes())
            out[rel] = h.hexdigest()
        for d in dirnames:  # empty directories count too
            rel = (base / d).relative_to(root).as_posix()
            out.setdefault(rel + "/", "D")
    return out


def tree_hash(m: dict[str, str]) -> str:
    h = hashlib.sha256()
    for k in sorted(m):
        h.update(k.encode() + b"\0" + m[k].encode() + b"\n")
    return h.hexdigest()


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or modified between two manifests."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
