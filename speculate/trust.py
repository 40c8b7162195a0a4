"""Workspace trust, stored where and as Claude Code stores it, so that trusting a folder in one tool trusts
it in the other.

Claude Code keeps a per-user global config, ``$CLAUDE_CONFIG_DIR/.claude.json`` (else ``~/.claude.json``),
whose ``projects`` map holds one entry per folder: ``projects["/abs/path"].hasTrustDialogAccepted: true``
once its trust dialog was accepted there. What 2.1.332 does with it (observed with ``claude -p``, see
docs/claude-code.md "Settings and modes"):

- A folder is trusted when its own entry says so or, inside a git repository, when a folder between it and
  the repository's root does; outside a repository a trusted parent does not count. The dialog records the
  answer at the repository's root (else at the folder itself); the home folder's answer is never recorded.
- Until then the project's ``permissions.allow`` and ``permissions.additionalDirectories`` are ignored, with a
  note on stderr (:func:`ignoring_note`): those of ``.claude/settings.json``, and of
  ``.claude/settings.local.json`` only when git tracks that file (an untracked local file is the user's own).
  Deny and ask rules, ``defaultMode``, hooks and MCP servers apply untrusted.

:mod:`speculate.settings` drops the entries; the REPL asks once and records the answer here
(:func:`record_trust`).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from speculate.instructions import git_root


def global_config_path() -> Path:
    """Claude Code's global config: ``$CLAUDE_CONFIG_DIR/.claude.json``, else ``~/.claude.json``."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(env).expanduser() if env else Path.home()) / ".claude.json"


def _abs(p: Path) -> Path:
    return Path(os.path.abspath(p))  # normalised, symlinks kept: the key Claude Code writes


def read_config(config: Path | None = None) -> dict[str, Any]:
    """The global config's JSON object ({} when the file is missing or unreadable, as Claude Code starts
    on defaults then)."""
    try:
        raw = json.loads((config or global_config_path()).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _entry(cfg: dict[str, Any], folder: Path) -> dict[str, Any]:
    projects = cfg.get("projects")
    entry = projects.get(str(folder)) if isinstance(projects, dict) else None
    return entry if isinstance(entry, dict) else {}


def record_key(project: Path) -> Path:
    """Where the trust dialog records its answer for ``project``: the git root, else the folder."""
    project = _abs(project)
    return _abs(git_root(project) or project)


def trusted_by(project: Path, *, config: Path | None = None) -> Path | None:
    """The folder whose entry trusts ``project`` (itself, or up to its git root), or None."""
    cfg = read_config(config)
    project = _abs(project)
    top = git_root(project)
    for d in (project, *project.parents):
        if _entry(cfg, d).get("hasTrustDialogAccepted") is True:
            return d
        if top is None or d == _abs(top):
            break
    real = Path(os.path.realpath(project))  # an entry written for the resolved path counts too
    if real != project and _entry(cfg, real).get("hasTrustDialogAccepted") is True:
        return real
    return None


def is_trusted(project: Path, *, config: Path | None = None) -> bool:
    return trusted_by(project, config=config) is not None


def project_entry(project: Path, *, config: Path | None = None) -> dict[str, Any]:
    """The global config's entry for ``project`` (where its trust is recorded), or {}."""
    return _entry(read_config(config), record_key(project))


def record_trust(project: Path, *, config: Path | None = None) -> Path | None:
    """Record that the user trusts ``project`` (at :func:`record_key`), keeping every other key of the
    file; the folder recorded, or None for the home folder, whose trust Claude Code holds for one session
    only. The file is replaced whole (a reader never sees half of it)."""
    key = record_key(project)
    if key == _abs(Path.home()):
        return None
    path = config or global_config_path()
    cfg = read_config(path)
    found = cfg.get("projects")
    projects: dict[str, Any] = found if isinstance(found, dict) else {}
    entry = {**_entry(cfg, key), "hasTrustDialogAccepted": True}
    cfg["projects"] = {**projects, str(key): entry}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".claude.json.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o600)  # it holds the user's account state: private, as Claude Code makes it
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return key


def git_tracks(project: Path, rel: str) -> bool:
    """Whether git tracks ``rel`` in ``project`` (in the index); False where it cannot tell (no git, not a
    repository), as Claude Code takes an indeterminate answer for a local settings file."""
    try:
        r = subprocess.run(
            ["git", "-C", str(project), "ls-files", "--error-unmatch", "--", rel],
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def ignoring_note(
    project: Path, key: str, count: int, files: list[str], *, config: Path | None = None
) -> str:
    """The note Claude Code prints when an untrusted workspace's entries are dropped, pointing at
    speculate's question as well as at the key to set."""
    entries = "entry" if count == 1 else "entries"
    where = " and ".join(files)
    return (
        f"Ignoring {count} {key} {entries} from {where}: this workspace has not been trusted. Run speculate "
        f"repl (or Claude Code) interactively here once and accept the trust question, or set "
        f'projects["{record_key(project)}"].hasTrustDialogAccepted: true in {config or global_config_path()}.'
    )


def session_trust(stated: bool | None, project: Path) -> bool:
    """A session's trust: what its caller states, else what the global config records."""
    return stated if stated is not None else is_trusted(project)
