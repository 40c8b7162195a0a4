"""Project instructions: CLAUDE.md files and rules, loaded in Claude Code 2.1.332's order into the system prompt.

Lowest precedence first (a later file wins where two disagree):

1. ``~/.claude/CLAUDE.md`` (``$CLAUDE_CONFIG_DIR/CLAUDE.md`` when set), then the user's rules
   (``~/.claude/rules/**/*.md``): the user's own, for every project;
2. for each directory from the top of the file system (``/`` itself excluded) down to the working
   directory: ``CLAUDE.md``, ``.claude/CLAUDE.md``, the rules of ``.claude/rules/`` (checked in), then
   ``CLAUDE.local.md`` (the user's, not checked in). Directories above the git root count too (a monorepo's
   or the home directory's CLAUDE.md is read, as Claude Code reads it).

A file reached twice (a CLAUDE.md symlinked to another) counts once. ``AGENTS.md`` is not read, as Claude
Code 2.1.332 does not read it: a ``CLAUDE.md`` holding ``@AGENTS.md`` imports it (what Claude Code's docs
advise). Rules (:mod:`speculate.instruction_rules`) whose front matter has ``paths`` wait for a file they
match; the ``claudeMdExcludes`` setting leaves files out.

Each file loses its front matter and its top-level HTML comments; ``@path`` imports
(:mod:`speculate.instruction_imports`) are expanded as files of their own after the file that imports them.
Files of subdirectories below the working directory and path-scoped rules are not in the system prompt: the
agent attaches them to a tool result (:mod:`speculate.instruction_nested`), as Claude Code does. Each file is
cut to :data:`FILE_BUDGET` characters and all of them to :data:`TOTAL_BUDGET`, with a note in the text and for
the user: one oversized file must not fill the context of every request of the session.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from speculate.instruction_imports import Scope, expand
from speculate.instruction_rules import excluder, walk_rules

# Per directory, lowest precedence first. A fork that writes one of these (at the project root, the only
# directory of the walk inside the project) changes the next request's system prompt: a boundary.
PROJECT_FILES: tuple[tuple[str, Literal["project", "local"]], ...] = (
    ("CLAUDE.md", "project"),
    (".claude/CLAUDE.md", "project"),
    ("CLAUDE.local.md", "local"),
)
RULES_DIR = ".claude/rules"
# AGENTS.md is not loaded, but the root CLAUDE.md often imports it: writing it stays a fork boundary.
INSTRUCTION_PATHS = frozenset({*(rel for rel, _ in PROJECT_FILES), "AGENTS.md"})
SCOPES = {
    "user": "the user's private global instructions for all projects",
    "project": "project instructions, checked into the codebase",
    "local": "the user's private project instructions, not checked in",
}
CHARS_PER_TOKEN = 4  # the simulator's estimate (speculate/sim/tokens.py); close enough for /memory
FILE_BUDGET = 40_000  # characters per file (Claude Code warns about a CLAUDE.md over 40k characters)
TOTAL_BUDGET = 120_000  # characters for all of them (about 30k tokens)


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
    """Whether a project-relative path is an instructions file this session loads at start."""
    rel = os.path.normpath(rel)
    return rel in INSTRUCTION_PATHS or (rel.startswith(RULES_DIR + "/") and rel.endswith(".md"))


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    scope: Scope
    text: str
    imported_by: Path | None = None  # the file whose @path brought it in

    @property
    def tokens(self) -> int:
        return -(-len(self.text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Instructions:
    files: tuple[InstructionFile, ...] = ()
    notes: tuple[str, ...] = ()  # for the user: cut files, imports left out

    @property
    def tokens(self) -> int:
        return sum(f.tokens for f in self.files)

    def render(self) -> str:
        """The text that goes into the system prompt's dynamic part ("" when there is none)."""
        return "\n".join(
            f"Contents of {f.path} ({SCOPES[f.scope]}):\n\n{f.text.strip()}\n" for f in self.files
        )


def cut(text: str, budget: int, path: Path) -> tuple[str, str | None]:
    """``text`` within ``budget`` characters (at a line end where one is near), and the note if it was cut."""
    if len(text) <= budget:
        return text, None
    head = text[:budget]
    if (nl := head.rfind("\n")) > budget * 0.9:
        head = head[: nl + 1]
    note = (
        f"{path}: {len(text):,} characters, cut to the first {len(head):,} (speculate sends at most "
        f"{FILE_BUDGET:,} per instructions file and {TOTAL_BUDGET:,} in all)"
    )
    return f"{head.rstrip()}\n\n[... cut here: {note}]\n", note


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:  # unreadable: as if absent (it is the user's file; /memory lists what loaded)
        return None


def top_down(cwd: Path) -> list[Path]:
    """``cwd`` and the directories above it, from the top of the file system down; ``/`` itself is not one
    (Claude Code 2.1.332 never reads ``/CLAUDE.md`` or ``/.claude``)."""
    return [d for d in reversed([cwd, *cwd.parents]) if d.parent != d]


def load_instructions(cwd: Path, *, user: Path | None = None, excludes: Sequence[str] = ()) -> Instructions:
    """Every instructions file that applies to ``cwd``, with its imports, in precedence order (lowest first);
    ``excludes``: the ``claudeMdExcludes`` patterns."""
    cwd = cwd.resolve()
    udir = user or user_dir()
    excluded = excluder(excludes)
    seen: set[str] = set()
    files: list[InstructionFile] = []
    notes: list[str] = []

    def add(path: Path, scope: Scope, *, rule: bool = False) -> None:
        if (text := _read(path)) is None:
            return
        # A project file's imports stay inside the working directory (Claude Code asks before it reads others).
        inside = None if scope == "user" else cwd
        found = expand(path, text, read=_read, seen=seen, inside=inside, notes=notes, excluded=excluded)
        # A scoped rule waits for a file it matches; what it imports without a scope of its own loads now,
        # as in Claude Code.
        files.extend(
            InstructionFile(f.path, scope, f.text, f.imported_by) for f in found if not (rule and f.globs)
        )

    add(udir / "CLAUDE.md", "user")
    for path in walk_rules(udir / "rules"):
        add(path, "user", rule=True)
    for d in top_down(cwd):
        for rel, scope in PROJECT_FILES[:2]:
            add(d / rel, scope)
        for path in walk_rules(d / RULES_DIR):
            add(path, "project", rule=True)
        add(d / PROJECT_FILES[2][0], PROJECT_FILES[2][1])
    return Instructions(*_budgeted(files, notes))


def _budgeted(
    files: Iterable[InstructionFile], notes: list[str]
) -> tuple[tuple[InstructionFile, ...], tuple[str, ...]]:
    out, left = [], TOTAL_BUDGET
    for f in files:
        if left <= 0:
            notes.append(
                f"{f.path}: left out (speculate sends at most {TOTAL_BUDGET:,} characters of instructions)"
            )
            continue
        text, note = cut(f.text, min(FILE_BUDGET, left), f.path)
        notes += [note] if note else []
        left -= len(text)
        out.append(InstructionFile(f.path, f.scope, text, f.imported_by))
    return tuple(out), tuple(notes)
