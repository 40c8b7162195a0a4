"""Edit: replace an exact string in a project file (unique unless replace_all); answers with a snippet."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from speculate.tools import shapes
from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult, run_io
from speculate.tools.common import display, fs_error, read_text, relative
from speculate.tools.read import number_lines
from speculate.tools.write import write_text

SNIPPET_CONTEXT = 3


class EditInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file_path: str = Field(description="Absolute path of the file (or relative to the project root)")
    old_string: str = Field(
        description="The exact text to replace (must occur exactly once unless replace_all)"
    )
    new_string: str = Field(description="The text to put in its place (must differ from old_string)")
    replace_all: bool = Field(default=False, description="Replace every occurrence of old_string")


class Edit(Tool):
    name = "Edit"
    description = (
        "Replace old_string with new_string in a project file. old_string must match the file exactly "
        "(whitespace included; no line-number prefixes from Read) and occur exactly once, unless "
        "replace_all is true. An empty old_string on a missing or empty file creates it with new_string."
    )
    Input: ClassVar[type[BaseModel]] = EditInput
    # Its capabilities (speculate.tools.registry derives the sets of tool names from them).
    path_field = "file_path"
    writes_files = True
    speculative = True
    shown_as = "diff"
    diff_fields = ("old_string", "new_string")
    hook_response = staticmethod(shapes.edit_response)
    edited = staticmethod(shapes.edit_edited)
    change_lines = staticmethod(shapes.edit_change_lines)

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        return await run_io(self.run, inp, ctx)

    def run(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, EditInput):
            raise self.wrong_input(inp)
        if inp.old_string == inp.new_string:
            raise ToolError("old_string and new_string are identical: there is nothing to change")
        rel = relative(ctx.fs, inp.file_path)
        shown = display(ctx.fs, rel)
        try:
            exists = ctx.fs.exists(rel)
        except OSError as e:
            raise fs_error(e, shown) from None
        if not exists:
            if inp.old_string:
                raise ToolError(f"File does not exist: {shown}")
            write_text(ctx.fs, rel, inp.new_string)
            return ToolResult(f"Created {shown}", written=(rel,))
        text = read_text(ctx.fs, rel, strict=True)
        old, new = inp.old_string, inp.new_string
        if old == "":
            if text:
                raise ToolError(f"old_string is empty but {shown} is not; use Write to replace a whole file")
            write_text(ctx.fs, rel, new)
            return ToolResult(f"Wrote {shown}", written=(rel,))
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old:
            # The model sees lines without their \r; match it against a CRLF file as it meant.
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            count = text.count(old)
        if count == 0:
            raise ToolError(
                f"old_string not found in {shown}; it must match exactly, including whitespace and "
                "indentation (Read the file again to see its current content)"
            )
        if count > 1 and not inp.replace_all:
            raise ToolError(
                f"old_string is not unique in {shown}: found {count} matches. Add surrounding lines to make "
                "it unique, or set replace_all to true to change every occurrence"
            )
        at = text.index(old)
        updated = text.replace(old, new) if inp.replace_all else text.replace(old, new, 1)
        write_text(ctx.fs, rel, updated)
        return ToolResult(
            f"Edited {shown}: replaced {count if inp.replace_all else 1} occurrence(s). Snippet:\n"
            + _snippet(updated, at, len(new)),
            written=(rel,),
        )


def _snippet(text: str, at: int, length: int) -> str:
    """The first replacement with a few lines around it, numbered like Read's output."""
    lines = text.split("\n")
    first = text.count("\n", 0, at)
    last = text.count("\n", 0, at + length)
    lo, hi = max(0, first - SNIPPET_CONTEXT), min(len(lines), last + SNIPPET_CONTEXT + 1)
    return "\n".join(number_lines(lines[lo:hi], lo + 1))
