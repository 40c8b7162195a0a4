"""Read: a text file with ``cat -n`` line numbers, a window of lines, long lines cut, big output paged."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from speculate.tools import shapes
from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult, run_io
from speculate.tools.common import display, in_spill_dir, is_binary, read_text, relative

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
# Above this the file is not loaded at all (the view reads whole files); Grep or Bash can look inside.
MAX_FILE_BYTES = 32 << 20


class ReadInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file_path: str = Field(description="Absolute path of the file (or relative to the project root)")
    offset: int | None = Field(default=None, ge=1, description="1-based line number to start from")
    limit: int | None = Field(
        default=None, ge=1, description=f"Number of lines to read (default {DEFAULT_LIMIT})"
    )


def number_lines(lines: list[str], first: int) -> list[str]:
    """``cat -n`` style: right-aligned line number, a tab, the line (cut past MAX_LINE_CHARS)."""
    out = []
    for i, line in enumerate(lines, start=first):
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}... [line truncated: {len(line)} chars]"
        out.append(f"{i:>6}\t{line}")
    return out


class Read(Tool):
    name = "Read"
    description = (
        "Read a text file from the project. Output is line-numbered like `cat -n` (number, tab, line). "
        f"Reads up to {DEFAULT_LIMIT} lines from the start by default; "
        "use offset (1-based) and limit to read "
        f"other parts of long files. Lines longer than {MAX_LINE_CHARS} characters are cut. Binary files "
        "are refused."
    )
    Input: ClassVar[type[BaseModel]] = ReadInput
    path_field = "file_path"
    rule_family = "Read"
    speculative = True
    shown_as = "count"
    hook_response = staticmethod(shapes.read_response)
    # About 25k tokens: a default 2000-line window of ordinary code fits; past it Read pages.
    max_result_chars: ClassVar[int] = 100_000

    def is_read_only(self, inp: BaseModel) -> bool:
        return True

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        return await run_io(self.run, inp, ctx)

    def run(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, ReadInput):
            raise self.wrong_input(inp)
        spilled = in_spill_dir(ctx, inp.file_path)
        if spilled is not None:  # our own saved outputs live outside the project
            try:
                data = spilled.read_bytes()
            except OSError as e:
                raise ToolError(f"Cannot read {spilled}: {e.strerror}") from None
            if is_binary(data):
                raise ToolError(f"{spilled} is a binary file; Read handles text files only")
            return self._render(data.decode("utf-8", errors="replace"), str(spilled), inp)
        rel = relative(ctx.fs, inp.file_path)
        shown = display(ctx.fs, rel)
        try:
            if ctx.fs.is_dir(rel):
                raise ToolError(f"{shown} is a directory, not a file (use Glob or Bash ls to list it)")
            size = ctx.fs.stat(rel).st_size
        except OSError:
            size = 0  # read_text below reports the error in the same words as every tool
        if size > MAX_FILE_BYTES:
            raise ToolError(
                f"{shown} is {size / (1 << 20):.0f} MiB, too large to Read; search it with Grep or "
                "view parts with Bash (head, sed -n 'A,Bp')"
            )
        return self._render(read_text(ctx.fs, rel), shown, inp)

    def _render(self, text: str, shown: str, inp: ReadInput) -> ToolResult:
        if text == "":
            return ToolResult(f"(file {shown} exists and is empty)")
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        total = len(lines)
        first = inp.offset or 1
        if first > total:
            raise ToolError(f"offset {first} is past the end of {shown}, which has {total} lines")
        limit = inp.limit or DEFAULT_LIMIT
        rendered = number_lines(lines[first - 1 : first - 1 + limit], first)
        # Page instead of spilling: a spilled Read would only be read again with Read.
        budget, used, kept = self.max_result_chars, 0, 0
        for line in rendered:
            used += len(line) + 1
            if used > budget and kept:
                break
            kept += 1
        body = "\n".join(rendered[:kept])
        last = first + kept - 1
        if last < total:
            why = "output size limit" if kept < len(rendered) else "line limit"
            body += (
                f"\n\n[{shown} has {total} lines; showed {first}-{last} ({why}). "
                f"Continue with offset={last + 1}.]"
            )
        return ToolResult(body)
