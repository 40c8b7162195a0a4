"""Completion in the input line, as Claude Code completes: ``/`` opens the menu of commands with what each
does, and ``@`` completes a path of the project (directories end in ``/``, so Tab goes on into them)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", ".mypy_cache", ".pytest_cache"})
MAX_PATHS = 50


class ReplCompleter(Completer):
    """``commands``: (name, description) pairs; ``project``: the directory ``@`` paths are relative to."""

    def __init__(self, commands: Sequence[tuple[str, str]], project: Callable[[], Path | None]) -> None:
        self.commands = commands
        self.project = project

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before:
            for name, desc in self.commands:
                if name.startswith(before):
                    yield Completion(name, start_position=-len(before), display_meta=desc)
            return
        word = before.rsplit(" ", 1)[-1].rsplit("\n", 1)[-1]
        if word.startswith("@"):
            root = self.project()
            if root is not None:
                for rel in paths(root, word[1:]):
                    yield Completion("@" + rel, start_position=-len(word), display=rel)


def paths(root: Path, typed: str) -> list[str]:
    """Entries under ``root`` whose relative path starts with ``typed`` (in its directory, then the ones
    below it whose name contains what was typed after the last ``/``), directories with a ``/``."""
    head, _, tail = typed.rpartition("/")
    base = root / head if head else root
    out: list[str] = []
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        if e.name in SKIP_DIRS or (e.name.startswith(".") and not tail.startswith(".")):
            continue
        if not e.name.startswith(tail):
            continue
        rel = f"{head}/{e.name}" if head else e.name
        out.append(rel + "/" if e.is_dir() else rel)
        if len(out) >= MAX_PATHS:
            break
    return out
