"""Helpers the file tools share: path resolution through the view, OSError → ToolError, text decoding,
the directories every search skips, and spilling oversized outputs to a file."""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

from overlayfs.paths import PathEscapeError, to_relative
from speculate import FileSystem, StrPath
from speculate.tools.base import ToolContext, ToolError

# Never searched or globbed (both Grep backends and Glob skip them, so results agree).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)
# A NUL byte in this many leading bytes marks a file as binary (as git and ripgrep decide).
BINARY_SNIFF = 8192
PREVIEW_CHARS = 2000


def relative(fs: FileSystem, path: StrPath) -> str:
    """``path`` (absolute inside the root, or relative to it) as a project-relative path, or ToolError."""
    rel_of = getattr(fs, "relative", None)  # LocalFS also accepts the root's realpath spelling
    try:
        return rel_of(path) if rel_of else to_relative(fs.root, path)
    except PathEscapeError as e:
        raise ToolError(f"Refused: {e}") from None
    except FileNotFoundError:
        raise ToolError("Invalid path: empty") from None


def display(fs: FileSystem, rel: str) -> str:
    """How tool outputs name a project file: absolute under the root, as the model writes paths."""
    return str(fs.root) if rel == "." else f"{fs.root}/{rel}"


def fs_error(e: OSError, shown: str) -> ToolError:
    """A ToolError that says what went wrong with ``shown`` in words the model can act on."""
    if isinstance(e, PathEscapeError):
        return ToolError(f"Refused: {e}")
    if isinstance(e, FileNotFoundError):
        return ToolError(f"File does not exist: {shown}")
    if isinstance(e, IsADirectoryError):
        return ToolError(f"{shown} is a directory, not a file (use Glob or Bash ls to list it)")
    if isinstance(e, NotADirectoryError):
        return ToolError(f"{shown}: a path component is not a directory")
    if isinstance(e, PermissionError):
        return ToolError(f"Permission denied: {shown}")
    reason = e.strerror or errno.errorcode.get(e.errno or 0, "") or str(e)
    return ToolError(f"{shown}: {reason}")


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_SNIFF]


def read_text(fs: FileSystem, rel: str, *, strict: bool = False) -> str:
    """A project text file's content; ToolError if missing, a directory, binary, or (strict) not UTF-8."""
    shown = display(fs, rel)
    try:
        data = fs.read_bytes(rel)
    except OSError as e:
        raise fs_error(e, shown) from None
    if is_binary(data):
        raise ToolError(f"{shown} is a binary file ({len(data)} bytes); this tool handles text files only")
    if strict:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ToolError(
                f"{shown} is not valid UTF-8 (byte {e.start}); editing it would corrupt it"
            ) from None
    return data.decode("utf-8", errors="replace")


def spill(content: str, ctx: ToolContext, *, tool: str, limit: int) -> str:
    """``content`` itself if it fits ``limit``, else a pointer to a file in ``ctx.spill_dir`` holding it."""
    if len(content) <= limit:
        return content
    ctx.spill_dir.mkdir(parents=True, exist_ok=True)
    path = Path(ctx.spill_dir) / f"{tool.lower()}-{uuid.uuid4().hex[:12]}.txt"
    path.write_text(content, encoding="utf-8")
    lines = content.count("\n") + (not content.endswith("\n"))
    return (
        f"Output too large ({len(content)} chars, {lines} lines); full output saved to {path} "
        f"(read it with Read offset/limit, or Bash grep/sed).\nPreview:\n{content[:PREVIEW_CHARS]}"
    )


def in_spill_dir(ctx: ToolContext, path: str) -> Path | None:
    """The real path of ``path`` if it names a file inside the spill directory (Read may open those)."""
    if not os.path.isabs(path):
        return None
    real = Path(os.path.realpath(path))
    spill_real = Path(os.path.realpath(ctx.spill_dir))
    return real if spill_real in real.parents else None
