"""Sensitive paths: files that make something run later, or configure the agent itself, without anyone
reading them (shell start-up files, git hooks and config, Claude Code's settings, editor tasks, hook
frameworks).

One list, two users: the permission gate asks before any tool writes one, in every mode but
``bypassPermissions``, whatever allow rule or PreToolUse hook says (what Claude Code 2.1.332 does: "Claude
requested permissions to edit …/.bashrc which is a sensitive file"); a speculative fork never writes one
(:mod:`speculate.speculation.guard`). Matching is by path segment at any depth, ignoring case and the
trailing dots and spaces that Windows and macOS file systems drop (git's ``is_ntfs_dotgit`` reasoning): on a
case-insensitive project ``.GIT/hooks`` *is* ``.git/hooks``.

Observed in Claude Code 2.1.332 (a Write of each in ``acceptEdits``; docs/claude-code.md): every name below
asked except where marked as speculate's own addition (stricter, listed there with the reason).
"""

from __future__ import annotations

import os
import unicodedata

# A directory segment anywhere in the path: everything below it is sensitive.
SENSITIVE_DIRS = frozenset({".git", ".claude", ".vscode", ".idea", ".husky", ".devcontainer"})
# A file name anywhere in the path.
SENSITIVE_FILES = frozenset(
    {
        # shells (observed)
        ".bashrc",
        ".bash_profile",
        ".zshrc",
        ".zprofile",
        ".profile",
        # shells (speculate's additions: read at start-up like the observed ones)
        ".bash_login",
        ".bash_logout",
        ".zshenv",
        ".zlogin",
        # git, tools and agents (observed)
        ".gitconfig",
        ".gitmodules",
        ".mcp.json",
        ".ripgreprc",
        ".envrc",
        ".npmrc",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        ".claude.json",
        "pyrightconfig.json",
        "bunfig.toml",
        # hook frameworks and credentials (speculate's additions)
        "lefthook.yaml",
        ".lefthook.yml",
        ".lefthook.yaml",
        ".git-credentials",
        ".netrc",
        ".pypirc",
    }
)
# Files known only by their directory: (parent segments..., name), matched at any depth.
SENSITIVE_PAIRS: tuple[tuple[str, ...], ...] = (
    (".cargo", "config.toml"),
    (".cargo", "config"),
    (".config", "git"),  # git's XDG configuration directory: everything below it
)
# Speculate's additions, for docs and the corpus's expected-stricter list.
ADDED = frozenset(
    {".bash_login", ".bash_logout", ".zshenv", ".zlogin", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml"}
    | {".git-credentials", ".netrc", ".pypirc"}
)


def fold(segment: str) -> str:
    """A path segment as a case-insensitive, normalising file system compares it: NFC, case-folded, trailing
    dots and spaces dropped (``.GIT. `` is ``.git`` on NTFS), zero-width characters removed (HFS+)."""
    text = unicodedata.normalize("NFC", segment).casefold()
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.rstrip(" .") or text


def sensitive_segment(path: str) -> str | None:
    """The segment that makes ``path`` (absolute or relative, ``/``-separated) sensitive, or None."""
    parts = [fold(p) for p in path.replace(os.sep, "/").split("/") if p not in ("", ".")]
    for pair in SENSITIVE_PAIRS:
        n = len(pair)
        if any(tuple(parts[i : i + n]) == pair for i in range(len(parts) - n + 1)):
            return "/".join(pair)
    for i, part in enumerate(parts):
        if part in SENSITIVE_DIRS and i < len(parts) - 1:
            return part
        if part in SENSITIVE_FILES or (part in SENSITIVE_DIRS and i == len(parts) - 1):
            return part
    return None


def is_sensitive(path: str) -> bool:
    return sensitive_segment(path) is not None


__all__ = [
    "ADDED",
    "SENSITIVE_DIRS",
    "SENSITIVE_FILES",
    "SENSITIVE_PAIRS",
    "fold",
    "is_sensitive",
    "sensitive_segment",
]
