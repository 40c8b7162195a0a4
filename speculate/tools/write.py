"""Write: create or overwrite a project file (parents created), through the filesystem view."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from speculate import FileSystem
from speculate.tools import shapes
from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult, run_io
from speculate.tools.common import display, fs_error, relative


class WriteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file_path: str = Field(description="Absolute path of the file (or relative to the project root)")
    content: str = Field(description="The complete new content of the file")


def write_text(fs: FileSystem, rel: str, content: str) -> bool:
    """Write ``content`` to ``rel``, creating parent directories; returns whether the file existed."""
    shown = display(fs, rel)
    if rel == ".":
        raise ToolError(f"{shown} is the project root, not a file")
    try:
        existed = fs.exists(rel)
        if existed and fs.is_dir(rel):
            raise ToolError(f"{shown} is a directory, not a file")
        parent = rel.rpartition("/")[0]
        if parent and not fs.is_dir(parent):
            parts = parent.split("/")
            for k in range(1, len(parts) + 1):
                ancestor = "/".join(parts[:k])
                if fs.exists(ancestor) and not fs.is_dir(ancestor):
                    raise ToolError(
                        f"Cannot create {shown}: {display(fs, ancestor)} is a file, not a directory"
                    )
            fs.mkdir(parent, parents=True)
        fs.write_bytes(rel, content.encode("utf-8"))
    except OSError as e:
        raise fs_error(e, shown) from None
    return existed


class Write(Tool):
    name = "Write"
    description = (
        "Write a file in the project, replacing it if it exists and creating missing parent directories. "
        "Prefer Edit for changing part of an existing file."
    )
    Input: ClassVar[type[BaseModel]] = WriteInput
    # Its capabilities (speculate.tools.registry derives the sets of tool names from them).
    path_field = "file_path"
    writes_files = True
    rule_family = "Edit"
    speculative = True
    shown_as = "diff"
    diff_fields = ("content",)
    hook_response = staticmethod(shapes.write_response)
    edited = staticmethod(shapes.write_edited)
    change_lines = staticmethod(shapes.write_change_lines)

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        return await run_io(self.run, inp, ctx)

    def run(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, WriteInput):
            raise self.wrong_input(inp)
        rel = relative(ctx.fs, inp.file_path)
        existed = write_text(ctx.fs, rel, inp.content)
        lines = inp.content.count("\n") + (bool(inp.content) and not inp.content.endswith("\n"))
        verb = "Updated" if existed else "Created"
        return ToolResult(f"{verb} {display(ctx.fs, rel)} ({lines} lines)", written=(rel,))
