"""Bash: run a shell command through the context's Shell, with a timeout, exit code and capped output.

Its working directory persists from call to call, as Claude Code's does (2.1.332, docs/claude-code.md): a
command that exits 0 leaves the next one where it ended (``ToolContext.cwd``); one that ends outside the
project and its additional working directories resets it to the project root, saying so in the result; a
directory that is gone by the next call is not run in. Environment variables do not persist.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from speculate.tools import shapes
from speculate.tools.base import Tool, ToolContext, ToolResult, run_io
from speculate.tools.common import spill

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1, description="The bash command to run")
    timeout_ms: int = Field(
        default=DEFAULT_TIMEOUT_MS,
        ge=1,
        le=MAX_TIMEOUT_MS,
        description="Timeout in milliseconds (max 600000)",
    )
    description: str | None = Field(default=None, description="What the command does, in a few words")


def is_read_only_command(command: str) -> bool:
    """What the bash classifier says; a command it cannot judge is treated as writing."""
    try:
        from speculate.shell.classify import classify
    except ModuleNotFoundError as e:
        if e.name not in ("speculate.shell", "speculate.shell.classify"):
            raise
        return False
    return classify(command).read_only


class Bash(Tool):
    name = "Bash"
    description = (
        "Run a bash command (stdin is closed). The working directory persists between calls (a `cd` "
        "carries over; it starts in the project root); environment variables do not. "
        f"Default timeout {DEFAULT_TIMEOUT_MS // 1000} s, at most {MAX_TIMEOUT_MS // 1000} s. "
        "Returns stdout, "
        "stderr and a non-zero exit code. Prefer Read, Edit, Glob and Grep for files."
    )
    Input: ClassVar[type[BaseModel]] = BashInput
    runs_commands = True
    speculative = True
    hook_response = staticmethod(shapes.bash_response)

    def is_read_only(self, inp: BaseModel) -> bool:
        if not isinstance(inp, BashInput):
            raise self.wrong_input(inp)
        return is_read_only_command(inp.command)

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, BashInput):
            raise self.wrong_input(inp)
        root = Path(ctx.fs.root)
        cwd = ctx.cwd
        if not await run_io(_is_dir, ctx, cwd):
            ctx.shell_dir.path = None
            return ToolResult(
                f'Working directory "{cwd}" no longer exists, so this command was not run. Shell cwd '
                f'recovered to "{root}": re-issue the command if it still makes sense there.',
                is_error=True,
            )
        res = await ctx.shell.run(inp.command, timeout=inp.timeout_ms / 1000, cwd=cwd)
        reset = False
        if res.cwd is not None:
            reset = not _inside(res.cwd, [root, *ctx.shell_dir.working_dirs])
            ctx.shell_dir.path = None if reset else Path(res.cwd)
        parts = [res.stdout.rstrip("\n")] if res.stdout.strip() else []
        if res.stderr.strip():
            parts.append(res.stderr.rstrip("\n"))
        if res.timed_out:
            parts.append(f"Command timed out after {inp.timeout_ms / 1000:g} s and was killed")
        elif res.exit_code != 0:
            parts.append(f"Exit code {res.exit_code}")
        if reset:
            parts.append(f"Shell cwd was reset to {root}")
        text = "\n".join(parts) or "(no output)"
        return ToolResult(
            spill(text, ctx, tool=self.name, limit=self.max_result_chars),
            is_error=res.timed_out or res.exit_code != 0,
        )


def _is_dir(ctx: ToolContext, path: Path) -> bool:
    """Is ``path`` a directory in the tree the command would see (a fork's overlay: its own changes too)?"""
    if _inside(path, [ctx.fs.root]):
        return ctx.fs.is_dir(path)
    return path.is_dir()  # an additional working directory: outside any overlay


def _inside(path: str | Path, dirs: list[Path]) -> bool:
    """Is ``path`` (physical, as ``pwd -P`` prints it) one of ``dirs`` or below one (their real paths)?"""
    p = Path(path)
    for d in dirs:
        for spelled in {Path(os.path.abspath(d)), Path(os.path.realpath(d))}:
            if p == spelled or spelled in p.parents:
                return True
    return False
