"""Project instructions: CLAUDE.md and friends, loaded in Claude Code's order into the system prompt.

Lowest precedence first (a later file wins where two disagree):

1. ``~/.claude/CLAUDE.md`` (``$CLAUDE_CONFIG_DIR/CLAUDE.md`` when set): the user's own, for every project;
2. for each directory from the git root down to the working directory: ``AGENTS.md``, ``CLAUDE.md``,
   ``.claude/CLAUDE.md`` (checked in) and ``CLAUDE.local.md`` (the user's, not checked in).

Nothing above the git root is read (outside a repository: the working directory alone), so a parent
repository's instructions never leak in. A file reached twice (a CLAUDE.md symlinked to AGENTS.md) counts
once. ``@include`` directives and ``.claude/rules/`` are not supported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# Per directory, lowest precedence first. A fork that writes one of these (at the project root, the only
# directory of the walk inside the project) changes the next request's system prompt: a boundary.
PROJECT_FILES: tuple[tuple[str, Literal["project", "local"]], ...] = (
    ("AGENTS.md", "project"), ("CLAUDE.md", "project"), (".claude/CLAUDE.md", "project"),
    ("CLAUDE.local.md", "local"),
)
INSTRUCTION_PATHS = frozenset(rel for rel, _ in PROJECT_FILES)
SCOPES = {
    "user": "the user's private global instructions for all projects",
    "project": "project instructions, checked into the codebase",
    "local": "the user's private project instructions, not checked in",
}
CHARS_PER_TOKEN = 4  # the simulator's estimate (speculate/sim/tokens.py); close enough for /memory


def user_dir() -> Path:
    """Claude Code's per-user directory: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env).expanduser() if env else Path.home() / ".claude"


def git_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory, or a file: worktrees and
    submodules), or None outside a repository."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def is_instructions_path(rel: str) -> bool:
    """Whether a project-relative path is an instructions file this session loads."""
    return os.path.normpath(rel) in INSTRUCTION_PATHS


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    scope: Literal["user", "project", "local"]
    text: str

    @property
    def tokens(self) -> int:
        return -(-len(self.text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Instructions:
    files: tuple[InstructionFile, ...] = ()

    @property
    def tokens(self) -> int:
        return sum(f.tokens for f in self.files)

    def render(self) -> str:
        """The text that goes into the system prompt's dynamic part ("" when there is none)."""
        return "\n".join(f"Contents of {f.path} ({SCOPES[f.scope]}):\n\n{f.text.rstrip()}\n" for f in self.files)


def load_instructions(cwd: Path, *, user: Path | None = None) -> Instructions:
    """Every instructions file that applies to ``cwd``, in precedence order (lowest first)."""
    cwd = cwd.resolve()
    candidates: list[tuple[Path, Literal["user", "project", "local"]]] = [
        ((user or user_dir()) / "CLAUDE.md", "user")]
    top = git_root(cwd) or cwd
    chain = [cwd, *cwd.parents]
    for d in reversed(chain[: chain.index(top) + 1]):
        candidates += [(d / rel, scope) for rel, scope in PROJECT_FILES]
    seen: set[str] = set()
    files = []
    for path, scope in candidates:
        try:
            if not path.is_file():
                continue
            real = os.path.realpath(path)
            if real in seen:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:  # unreadable: as if absent (it is the user's file; /memory lists what loaded)
            continue
        seen.add(real)
        if text.strip():
            files.append(InstructionFile(path, scope, text))
    return Instructions(tuple(files))
