"""speculate: speculative execution for LLM coding agents.

Owns the agent loop on the Messages API (:mod:`speculate.agent`), its tools (:mod:`speculate.tools`), the
model backends (:mod:`speculate.models`), the embedded simulator (:mod:`speculate.sim`), the speculation
engine (:mod:`speculate.speculation`), the REPL (:mod:`speculate.repl`) and the CLI.

The protocols that the parts meet at live here, at the package root.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__version__ = "0.1.0"
# The folder above this package: the source checkout when it runs from one (bench/, .venv/ beside it), else
# site-packages. One place for what the CLI, the bundled scenarios and the Claude Code install look up.
CHECKOUT = Path(__file__).resolve().parent.parent

StrPath = str | os.PathLike[str]


@runtime_checkable
class FileSystem(Protocol):
    """A view of the project tree, rooted at ``root``. Tools open project paths only through this.

    Paths are relative to the root, or absolute inside it; anything resolving outside raises
    :class:`overlayfs.PathEscapeError`. Errors are the ``OSError`` subclasses a filesystem raises.
    :class:`speculate.fs.LocalFS` serves the real tree; :class:`overlayfs.Overlay` a speculative one.
    """

    @property
    def root(self) -> Path: ...

    def read_bytes(self, path: StrPath) -> bytes: ...
    def write_bytes(self, path: StrPath, data: bytes) -> None: ...
    def exists(self, path: StrPath) -> bool: ...
    def is_file(self, path: StrPath) -> bool: ...
    def is_dir(self, path: StrPath) -> bool: ...
    def stat(self, path: StrPath) -> os.stat_result: ...
    def listdir(self, path: StrPath) -> list[str]: ...

    def walk(self, path: StrPath = ".") -> Iterator[tuple[str, list[str], list[str]]]:
        """Like ``os.walk`` top-down: (dirpath relative to root, "." for the root; dirnames; filenames),
        sorted; prune by editing dirnames in place. Symlinked directories are not descended."""
        ...

    def mkdir(self, path: StrPath, parents: bool = False) -> None: ...
    def unlink(self, path: StrPath) -> None: ...
    def rename(self, src: StrPath, dst: StrPath) -> None: ...


@dataclass(frozen=True)
class ShellResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    # Where the command left the shell (``pwd -P``), for a run given a ``cwd``, and only when it exited 0,
    # as Claude Code records it: the Bash tool's next command starts there.
    cwd: str | None = None


class Shell(Protocol):
    """Runs a Bash command for the Bash tool: on the real tree, or sandboxed over a mounted overlay.
    With ``cwd`` (the Bash tool's calls) it starts there and reports where it ended (``ShellResult.cwd``)."""

    async def run(self, command: str, *, timeout: float, cwd: StrPath | None = None) -> ShellResult: ...


__all__ = ["FileSystem", "Shell", "ShellResult", "StrPath"]
