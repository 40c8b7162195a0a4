"""Project instructions: CLAUDE.md and friends, loaded in Claude Code's order into the system prompt.

Lowest precedence first (a later file wins where two disagree):

1. ``~/.claude/CLAUDE.md`` (``$CLAUDE_CONFIG_DIR/CLAUDE.md`` when set): the user's own, for every project;
2. for each directory from the git root down to the working directory: ``CLAUDE.md``, ``.claude/CLAUDE.md``
   (checked in) and ``CLAUDE.local.md`` (the user's, not checked in).

Nothing above the git root is read (outside a repository: the working directory alone), so a parent
repository's instructions never leak in. A file reached twice (a CLAUDE.md symlinked to another) counts once.
``AGENTS.md`` is not read, as Claude Code 2.1.332 does not read it: a ``CLAUDE.md`` holding ``@AGENTS.md``
imports it (what Claude Code's docs advise).

``@path`` imports (:mod:`speculate.instruction_imports`) are expanded as files of their own after the file
that imports them. Files in subdirectories below the working directory are not in the system prompt: the
agent attaches them to the tool result of the first Read, Edit or Write of a file there
(:func:`nested_reminders`), as Claude Code does. Each file is cut to :data:`FILE_BUDGET` characters and all
of them to :data:`TOTAL_BUDGET`, with a note in the text and for the user: one oversized file must not fill
the context of every request of the session.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from speculate.instruction_imports import Scope, expand

if TYPE_CHECKING:
    from speculate import FileSystem

# Per directory, lowest precedence first. A fork that writes one of these (at the project root, the only
# directory of the walk inside the project) changes the next request's system prompt: a boundary.
PROJECT_FILES: tuple[tuple[str, Literal["project", "local"]], ...] = (
    ("CLAUDE.md", "project"),
    (".claude/CLAUDE.md", "project"),
    ("CLAUDE.local.md", "local"),
)
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
    """Whether a project-relative path is an instructions file this session loads."""
    return os.path.normpath(rel) in INSTRUCTION_PATHS


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
            f"Contents of {f.path} ({SCOPES[f.scope]}):\n\n{f.text.rstrip()}\n" for f in self.files
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


def load_instructions(cwd: Path, *, user: Path | None = None) -> Instructions:
    """Every instructions file that applies to ``cwd``, with its imports, in precedence order (lowest first)."""
    cwd = cwd.resolve()
    candidates: list[tuple[Path, Scope]] = [((user or user_dir()) / "CLAUDE.md", "user")]
    top = git_root(cwd) or cwd
    chain = [cwd, *cwd.parents]
    for d in reversed(chain[: chain.index(top) + 1]):
        candidates += [(d / rel, scope) for rel, scope in PROJECT_FILES]
    seen: set[str] = set()
    files: list[InstructionFile] = []
    notes: list[str] = []
    for path, scope in candidates:
        if os.path.realpath(path) in seen or (text := _read(path)) is None:
            continue
        # A project file's imports stay inside the project (Claude Code asks before it reads others).
        inside = None if scope == "user" else top
        for p, t, by in expand(path, text, read=_read, seen=seen, inside=inside, notes=notes):
            if t.strip():
                files.append(InstructionFile(p, scope, t, by))
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


# -- subdirectories, attached to tool results --------------------------------------------------------------

NESTED_TOOLS = frozenset({"Read", "Edit", "Write"})  # Claude Code 2.1.332: not Glob or Grep


def reminder(path: Path | str, text: str) -> str:
    """One nested instructions file as Claude Code attaches it after a tool result."""
    return f"<system-reminder>\nContents of {path}:\n\n{text.rstrip()}\n\n</system-reminder>"


_SENT_RE = re.compile(r"^<system-reminder>\nContents of (.+?):\n")


def sent_paths(texts: Iterable[str]) -> set[str]:
    """The paths of the nested instructions already attached, from a conversation's text blocks."""
    return {m.group(1) for t in texts if (m := _SENT_RE.match(t))}


def nested_reminders(
    root: Path,
    touched: Iterable[Path],
    sent: Callable[[], set[str]],
    *,
    read: Callable[[Path], str | None] = _read,
) -> list[str]:
    """The ``<system-reminder>`` blocks for the instructions files of the subdirectories holding ``touched``
    (absolute paths of files the agent read or wrote), from below ``root`` down to each file's directory,
    leaving out those already in the conversation (``sent()``, asked only when there is a candidate): each
    is sent once per conversation. ``read``: the host's files by default; a fork reads its overlay."""
    blocks: list[str] = []
    seen: set[str] = set()
    already: set[str] | None = None
    for file in touched:
        try:
            rel = file.parent.relative_to(root)
        except ValueError:
            continue  # outside the project
        d = root
        for part in rel.parts:
            d = d / part
            for name, _ in PROJECT_FILES:
                path = d / name
                if os.path.realpath(path) in seen or (text := read(path)) is None:
                    continue
                already = sent() if already is None else already
                for p, t, _by in expand(path, text, read=read, seen=seen, inside=root, notes=[]):
                    if t.strip() and str(p) not in already:
                        blocks.append(reminder(p, cut(t, FILE_BUDGET, p)[0]))
    return blocks


def nested_for_calls(
    fs: FileSystem,
    uses: Iterable[Mapping[str, Any]],
    results: Iterable[Mapping[str, Any]],
    messages: Iterable[Mapping[str, Any]],
) -> list[str]:
    """The agent's side of :func:`nested_reminders`: the files this round's successful Read, Edit and Write
    calls touched, read through the agent's file system ``fs`` (a fork sees its own overlay)."""
    root_of = getattr(fs, "root", None)
    if root_of is None:
        return []
    root = Path(root_of)
    ok = {r.get("tool_use_id") for r in results if not r.get("is_error")}
    touched = [
        Path(os.path.normpath(root / u["input"]["file_path"]))
        for u in uses
        if u.get("name") in NESTED_TOOLS
        and u.get("id") in ok
        and isinstance((u.get("input") or {}).get("file_path"), str)
    ]
    if not touched:
        return []

    def read(path: Path) -> str | None:
        try:
            rel = str(path.relative_to(root))
            return fs.read_bytes(rel).decode("utf-8", errors="replace") if fs.is_file(rel) else None
        except (OSError, ValueError):
            return None

    def sent() -> set[str]:
        return sent_paths(
            b.get("text", "")
            for m in messages
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "text"
        )

    return nested_reminders(root, touched, sent, read=read)
