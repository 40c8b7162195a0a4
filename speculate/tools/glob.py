"""Glob: project files whose path matches a glob pattern, newest first, capped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from speculate import FileSystem
from speculate.tools import shapes
from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult, between_files, run_io
from speculate.tools.common import SKIP_DIRS, display, fs_error, relative, spill
from speculate.tools.globmatch import compile_glob, literal_prefix

MAX_RESULTS = 100


class GlobInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str = Field(description='Glob pattern, e.g. "**/*.py" or "src/**/test_*.ts"')
    path: str | None = Field(default=None, description="Directory to search in (default: the project root)")


def walk_files(fs: FileSystem, top: str) -> Iterator[str]:
    """Project-relative paths of the files under directory ``top``, skipping SKIP_DIRS."""
    for dirpath, dirnames, filenames in fs.walk(top):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            yield name if dirpath == "." else f"{dirpath}/{name}"


def mtime_or_zero(fs: FileSystem, rel: str) -> int:
    try:
        return fs.stat(rel).st_mtime_ns
    except OSError:  # a dangling or escaping link still sorts, last
        return 0


def newest_first(fs: FileSystem, rels: list[str]) -> list[str]:
    return sorted(rels, key=lambda r: (-mtime_or_zero(fs, r), r))


def join(base: str, rel: str) -> str:
    if base == ".":
        return rel or "."
    return f"{base}/{rel}" if rel else base


class Glob(Tool):
    name = "Glob"
    description = (
        'Find files by path pattern ("**/*.py", "src/**/*.{ts,tsx}"). The pattern is matched against paths '
        f"relative to `path` (default: the project root). "
        "Returns absolute paths, most recently modified first, "
        f"at most {MAX_RESULTS}. VCS, virtualenv and cache directories are skipped."
    )
    Input: ClassVar[type[BaseModel]] = GlobInput
    path_field = "path"
    searches_directory = True
    rule_family = "Read"
    speculative = True
    hook_response = staticmethod(shapes.glob_response)

    def is_read_only(self, inp: BaseModel) -> bool:
        return True

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        return await run_io(self.run, inp, ctx)

    def run(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, GlobInput):
            raise self.wrong_input(inp)
        fs = ctx.fs
        base = relative(fs, inp.path) if inp.path else "."
        pattern = inp.pattern
        if pattern.startswith("/"):  # an absolute pattern inside the root (or under `path`)
            pattern = relative(fs, pattern)
            if base != ".":
                prefix = base + "/"
                if not pattern.startswith(prefix):
                    raise ToolError(f"pattern {inp.pattern!r} is not under path {display(fs, base)}")
                pattern = pattern[len(prefix) :]
        if not pattern or pattern == ".":
            raise ToolError(f"empty glob pattern {inp.pattern!r}")
        try:
            regex = compile_glob(pattern)
        except ValueError as e:
            raise ToolError(str(e)) from None
        fixed, _ = literal_prefix(pattern)
        top = join(base, fixed)
        hits: list[str] = []
        try:
            if base != "." and not fs.is_dir(base):
                what = "Not a directory" if fs.exists(base) else "Directory does not exist"
                raise ToolError(f"{what}: {display(fs, base)}")
            if fs.is_dir(top):
                for n, rel in enumerate(walk_files(fs, top)):
                    if n % 100 == 0:
                        between_files()
                    sub = rel if base == "." else rel[len(base) + 1 :]
                    if regex.match(sub) and not (ctx.hidden is not None and ctx.hidden(rel)):
                        hits.append(rel)
        except OSError as e:
            raise fs_error(e, display(fs, top)) from None
        if not hits:
            return ToolResult("No files found")
        ordered = newest_first(fs, hits)
        lines = [display(fs, r) for r in ordered[:MAX_RESULTS]]
        if len(ordered) > MAX_RESULTS:
            lines.append(
                f"(Results are truncated: showing {MAX_RESULTS} of {len(ordered)} files. Use a more specific "
                "path or pattern.)"
            )
        return ToolResult(spill("\n".join(lines), ctx, tool=self.name, limit=self.max_result_chars))
