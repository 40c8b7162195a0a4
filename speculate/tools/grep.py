"""Grep: regex search over project files, by ripgrep on the real tree and in Python over any other view.

Both backends search the same files (hidden files included, SKIP_DIRS and binary files skipped, symlinks
not followed) and feed one formatter, so their outputs agree: files newest first, or ``path:line:text``
lines, or per-file counts of matching lines.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from typing import ClassVar, Literal

import trio
from pydantic import BaseModel, ConfigDict, Field

from speculate import FileSystem
from speculate.tools import base as tool_base
from speculate.tools import shapes
from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult, between_files, run_io
from speculate.tools.common import SKIP_DIRS, display, fs_error, relative, spill
from speculate.tools.glob import newest_first, walk_files
from speculate.tools.globmatch import match_ignore_style

MAX_COLUMNS = 500
# ripgrep stops at a NUL in about its first buffer; the fallback treats a NUL this early as binary.
BINARY_WINDOW = 64 << 10

Matches = dict[str, list[tuple[int, str]]]  # project-relative path -> (line number, line text)


class GrepInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str = Field(description="Regular expression to search for (ripgrep syntax)")
    path: str | None = Field(default=None, description="File or directory to search (default: project root)")
    glob: str | None = Field(default=None, description='Only search files matching this glob, e.g. "*.py"')
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        default="files_with_matches",
        description="content: matching lines; files_with_matches: file paths; count: matches per file",
    )
    case_insensitive: bool = Field(default=False, description="Ignore case")
    head_limit: int | None = Field(default=None, ge=1, description="Return only the first N lines/files")


class Grep(Tool):
    name = "Grep"
    description = (
        "Search file contents with a regular expression (ripgrep syntax). output_mode files_with_matches "
        "(default) lists matching files newest first; content shows path:line:text; count shows matching "
        'lines per file. Filter files with glob ("*.py", "src/**/*.ts"). Hidden files are searched; VCS, '
        "virtualenv and cache directories and binary files are skipped."
    )
    Input: ClassVar[type[BaseModel]] = GrepInput
    path_field = "path"
    searches_directory = True
    rule_family = "Read"
    speculative = True
    hook_response = staticmethod(shapes.grep_response)

    def is_read_only(self, inp: BaseModel) -> bool:
        return True

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, GrepInput):
            raise self.wrong_input(inp)
        matches = await search(ctx.fs, inp)
        if ctx.hidden is not None:  # files a Read deny rule covers
            matches = {rel: found for rel, found in matches.items() if not ctx.hidden(rel)}
        text = await run_io(format_matches, ctx.fs, matches, inp)  # stats every file (newest first)
        return ToolResult(spill(text, ctx, tool=self.name, limit=self.max_result_chars))


def use_ripgrep(fs: FileSystem) -> bool:
    from speculate.fs import LocalFS

    return isinstance(fs, LocalFS) and shutil.which("rg") is not None


async def search(
    fs: FileSystem, inp: GrepInput, *, backend: Literal["auto", "rg", "python"] = "auto"
) -> Matches:
    """All matching lines, by file. ``backend`` forces one (tests compare them)."""
    base = relative(fs, inp.path) if inp.path else "."
    await run_io(_check_exists, fs, base)
    if backend == "rg" or (backend == "auto" and use_ripgrep(fs)):
        return await _search_rg(fs, inp, base)
    return await _search_python(fs, inp, base)


def _check_exists(fs: FileSystem, base: str) -> None:
    try:
        if not fs.exists(base):
            raise ToolError(f"Path does not exist: {display(fs, base)}")
    except OSError as e:
        raise fs_error(e, display(fs, base)) from None


async def _search_rg(fs: FileSystem, inp: GrepInput, base: str) -> Matches:
    args = ["rg", "--json", "--no-config", "--hidden", "--no-ignore", "--no-messages"]
    if inp.case_insensitive:
        args.append("-i")
    if inp.glob:
        args += ["--glob", inp.glob]
    for d in sorted(SKIP_DIRS):  # after the user's glob: the last matching glob wins in ripgrep
        args += ["--glob", f"!{d}"]
    # Always name the path: with none, ripgrep reads stdin when it is not a terminal.
    args += ["-e", inp.pattern, "--", base]
    proc = await trio.run_process(
        args, cwd=fs.root, stdin=b"", capture_stdout=True, capture_stderr=True, check=False
    )
    matches: Matches = {}
    for raw in proc.stdout.splitlines():
        event = json.loads(raw)
        if event["type"] != "match":
            continue
        data = event["data"]
        rel = relative(fs, _rg_text(data["path"]))
        text = _rg_text(data["lines"])
        matches.setdefault(rel, []).append((data["line_number"], text.removesuffix("\n")))
    if proc.returncode == 2 and not matches:
        err = proc.stderr.decode("utf-8", errors="replace").strip()
        raise ToolError(f"Grep failed for pattern {inp.pattern!r}: {err or 'ripgrep exited with status 2'}")
    return matches


def _rg_text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode("utf-8", errors="replace")


async def _search_python(fs: FileSystem, inp: GrepInput, base: str) -> Matches:
    try:
        regex = re.compile(inp.pattern, re.IGNORECASE if inp.case_insensitive else 0)
    except re.error as e:
        raise ToolError(f"Invalid regex {inp.pattern!r}: {e}") from None
    if tool_base.INLINE_IO:  # the benchmark's "before": on the loop, a checkpoint every 100 files
        files = _files(fs, base)
        matches: Matches = {}
        for i in range(0, len(files), 100):
            await trio.lowlevel.checkpoint()
            _scan(fs, files[i : i + 100], inp, regex, matches)
        return matches
    return await run_io(_search_files, fs, inp, base, regex)


def _search_files(fs: FileSystem, inp: GrepInput, base: str, regex: re.Pattern[str]) -> Matches:
    matches: Matches = {}
    _scan(fs, _files(fs, base), inp, regex, matches)
    return matches


def _files(fs: FileSystem, base: str) -> list[str]:
    try:
        return list(walk_files(fs, base)) if fs.is_dir(base) else [base]
    except OSError as e:
        raise fs_error(e, display(fs, base)) from None


def _scan(fs: FileSystem, files: list[str], inp: GrepInput, regex: re.Pattern[str], matches: Matches) -> None:
    for rel in files:
        between_files()
        if inp.glob and not _glob_ok(inp.glob, rel):
            continue
        try:
            data = fs.read_bytes(rel)
        except OSError:  # unreadable, dangling, or a link out of the project: ripgrep skips these too
            continue
        nul = data.find(b"\0")
        if 0 <= nul < BINARY_WINDOW:
            continue
        if nul >= 0:
            data = data[: data.rfind(b"\n", 0, nul) + 1]
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        found = [
            (i, text)
            for i, line in enumerate(lines, start=1)
            if regex.search(text := line.decode("utf-8", errors="replace"))
        ]
        if found:
            matches[rel] = found


def _glob_ok(glob: str, rel: str) -> bool:
    if glob.startswith("!"):  # an exclusion also excludes everything under a matching directory
        parts = rel.split("/")
        return not any(match_ignore_style(glob[1:], "/".join(parts[:k])) for k in range(1, len(parts) + 1))
    return match_ignore_style(glob, rel)


def format_matches(fs: FileSystem, matches: Matches, inp: GrepInput) -> str:
    """The tool output for ``matches`` in ``inp.output_mode``, cut to ``inp.head_limit`` entries."""
    if not matches:
        return "No matches found" if inp.output_mode == "content" else "No files found"
    total = sum(len(v) for v in matches.values())
    if inp.output_mode == "files_with_matches":
        entries = [display(fs, r) for r in newest_first(fs, list(matches))]
        head = f"Found {len(entries)} files"
        unit = "files"
    elif inp.output_mode == "count":
        entries = [f"{display(fs, r)}:{len(matches[r])}" for r in sorted(matches)]
        head = f"Found {total} matching lines in {len(entries)} files"
        unit = "files"
    else:
        entries = [f"{display(fs, r)}:{n}:{_cut(t)}" for r in sorted(matches) for n, t in matches[r]]
        head = ""
        unit = "lines"
    shown = entries[: inp.head_limit] if inp.head_limit else entries
    out = ([head] if head else []) + shown
    if len(shown) < len(entries):
        out.append(
            f"[showing first {len(shown)} of {len(entries)} {unit}; narrow the search or raise head_limit]"
        )
    return "\n".join(out)


def _cut(line: str) -> str:
    return line if len(line) <= MAX_COLUMNS else f"{line[:MAX_COLUMNS]}... [{len(line)} chars]"
