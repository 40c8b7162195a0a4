"""Bash: run a shell command through the context's Shell, with a timeout, exit code and capped output."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from speculate.tools.base import Tool, ToolContext, ToolResult
from speculate.tools.common import spill

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1, description="The bash command to run (in the project root)")
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
        "Run a bash command in the project root (stdin is closed; each call starts a fresh shell). "
        f"Default timeout {DEFAULT_TIMEOUT_MS // 1000} s, at most {MAX_TIMEOUT_MS // 1000} s. "
        "Returns stdout, "
        "stderr and a non-zero exit code. Prefer Read, Edit, Glob and Grep for files."
    )
    Input: ClassVar[type[BaseModel]] = BashInput

    def is_read_only(self, inp: BaseModel) -> bool:
        if not isinstance(inp, BashInput):
            raise self.wrong_input(inp)
        return is_read_only_command(inp.command)

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, BashInput):
            raise self.wrong_input(inp)
        res = await ctx.shell.run(inp.command, timeout=inp.timeout_ms / 1000)
        parts = [res.stdout.rstrip("\n")] if res.stdout.strip() else []
        if res.stderr.strip():
            parts.append(res.stderr.rstrip("\n"))
        if res.timed_out:
            parts.append(f"Command timed out after {inp.timeout_ms / 1000:g} s and was killed")
        elif res.exit_code != 0:
            parts.append(f"Exit code {res.exit_code}")
        text = "\n".join(parts) or "(no output)"
        return ToolResult(
            spill(text, ctx, tool=self.name, limit=self.max_result_chars),
            is_error=res.timed_out or res.exit_code != 0,
        )
