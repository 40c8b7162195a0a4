"""NotebookEdit: replace, insert or delete one cell of a Jupyter notebook (``.ipynb``), as Claude Code's tool
of that name does (2.1.332, a deferred tool there: the schema and the texts below were read from it, see
docs/claude-code.md "NotebookEdit").

- ``replace`` (the default) sets the cell's source (and its type, when given); a code cell loses its
  outputs and execution count. ``insert`` adds a cell after ``cell_id`` (first, without one) with a new
  8-hex-digit id; ``cell_type`` is required. ``delete`` removes the cell.
- ``cell_id`` is a cell's ``id``, or ``cell-N`` for the N-th cell (from 0) when no cell has that id.
- The notebook is written back as Claude Code writes it: JSON indented by one space, non-ASCII kept, a final
  newline.

Everything the rest of speculate needs to know of the tool is declared on its class (the registry,
:mod:`speculate.tools.registry`, lists it): it writes the file at ``notebook_path``, ``Edit(path)`` rules
cover it, a fork may run it, hooks get Claude Code's ``tool_response`` and the REPL shows the cell's change.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult, run_io
from speculate.tools.common import display, fs_error, read_text, relative
from speculate.tools.shapes import snippet_diff
from speculate.tools.write import write_text

_INDEX_ID = re.compile(r"cell-(\d+)")


class NotebookEditInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    notebook_path: str = Field(
        description="Absolute path of the Jupyter notebook to edit (or relative to the project root)"
    )
    cell_id: str | None = Field(
        default=None,
        description="The id of the cell to edit. When inserting, the new cell goes after this cell, or "
        "first if not given",
    )
    new_source: str = Field(description="The new source of the cell")
    cell_type: Literal["code", "markdown"] | None = Field(
        default=None,
        description="The cell's type (code or markdown); default: its current type. Required to insert",
    )
    edit_mode: Literal["replace", "insert", "delete"] | None = Field(
        default=None, description="replace (the default), insert or delete"
    )


@dataclass(frozen=True)
class CellEdit:
    """One edit applied to a notebook's text: the new text, the model's answer, and what hooks are told."""

    text: str
    answer: str
    cell_id: str  # the cell edited, or the inserted cell's new id
    old_source: str | None  # replace and delete: the cell's source before
    language: str


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def apply(text: str, inp: dict[str, Any], *, new_id: str | None = None) -> CellEdit:
    """``inp`` (a NotebookEdit input) applied to the notebook ``text``; ToolError as Claude Code words it."""
    mode = inp.get("edit_mode") or "replace"
    cell_id, source, cell_type = inp.get("cell_id"), str(inp.get("new_source", "")), inp.get("cell_type")
    if mode == "insert" and not cell_type:
        raise ToolError("Cell type is required when using edit_mode=insert.")
    if mode != "insert" and not cell_id:
        raise ToolError("Cell ID must be specified when not inserting a new cell.")
    try:
        nb = json.loads(text)
    except json.JSONDecodeError:
        raise ToolError("Notebook is not valid JSON.") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ToolError("Notebook is not valid: it has no list of cells.")
    at = 0
    if cell_id:
        at = next((i for i, c in enumerate(cells) if isinstance(c, dict) and c.get("id") == cell_id), -1)
        if at < 0 and (m := _INDEX_ID.fullmatch(cell_id)) and int(m[1]) < len(cells):
            at = int(m[1])
        if at < 0:
            raise ToolError(f'Cell with ID "{cell_id}" not found in notebook.')
    info = nb.get("metadata", {}).get("language_info", {})
    language = str(info.get("name", "python")) if isinstance(info, dict) else "python"
    old: str | None = None
    if mode == "insert":
        cell: dict[str, Any] = {"cell_type": cell_type}
        if (nb.get("nbformat", 4), nb.get("nbformat_minor", 0)) >= (4, 5):
            cell["id"] = new_id or uuid.uuid4().hex[:8]
        cell |= {"source": source, "metadata": {}}
        if cell_type == "code":
            cell |= {"execution_count": None, "outputs": []}
        cells.insert(at + 1 if cell_id else 0, cell)
        edited_id, answer = str(cell.get("id", cell_id or "")), "Inserted cell {} with " + source
    elif mode == "delete":
        old = _source(cells.pop(at))
        edited_id, answer = str(cell_id), "Deleted cell {}"
    else:
        cell = cells[at]
        old = _source(cell)
        cell["source"] = source
        if cell_type:
            cell["cell_type"] = cell_type
        if cell.get("cell_type") == "code":
            cell["execution_count"], cell["outputs"] = None, []
        else:
            cell.pop("execution_count", None)
            cell.pop("outputs", None)
        edited_id, answer = str(cell_id), "Updated cell {} with " + source
    out = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    return CellEdit(out, answer.format(edited_id), edited_id, old, language)


class NotebookEdit(Tool):
    name = "NotebookEdit"
    description = (
        "Replace, insert or delete one cell of a Jupyter notebook (.ipynb file). cell_id is a cell's id "
        '(the "id" field of the notebook\'s JSON). edit_mode defaults to replace; insert adds a cell after '
        "cell_id (first without one) and needs cell_type; delete removes the cell."
    )
    Input: ClassVar[type[BaseModel]] = NotebookEditInput
    path_field = "notebook_path"
    writes_files = True
    rule_family = "Edit"
    speculative = True
    shown_as = "diff"
    diff_fields = ("new_source",)

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        return await run_io(self.run, inp, ctx)

    def run(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        if not isinstance(inp, NotebookEditInput):
            raise self.wrong_input(inp)
        rel = relative(ctx.fs, inp.notebook_path)
        shown = display(ctx.fs, rel)
        if not rel.endswith(".ipynb"):
            raise ToolError(
                "File must be a Jupyter notebook (.ipynb file). For editing other file types, use the Edit tool."
            )
        try:
            exists = ctx.fs.exists(rel)
        except OSError as e:
            raise fs_error(e, shown) from None
        if not exists:
            raise ToolError(f"Notebook file does not exist: {shown}")
        done = apply(read_text(ctx.fs, rel, strict=True), inp.model_dump())
        write_text(ctx.fs, rel, done.text)
        return ToolResult(done.answer, written=(rel,))

    @classmethod
    def hook_response(
        cls, inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
    ) -> Any:
        """Claude Code's: the edit, the cell's old source (not for an insert), both whole files."""
        mode = inp.get("edit_mode") or "replace"
        text = content if isinstance(content, str) else ""
        new_id = m[1] if (m := re.match(r"Inserted cell (\S+) with ", text)) else None
        try:
            done: CellEdit | None = apply(before or "", inp, new_id=new_id)
        except ToolError:
            done = None
        out: dict[str, Any] = {"new_source": inp.get("new_source", "")}
        if mode != "insert":
            out["old_source"] = done.old_source if done is not None else ""
        return out | {
            "cell_type": inp.get("cell_type") or "code",  # Claude Code's default, whatever the cell's type
            "language": done.language if done is not None else "python",
            "edit_mode": mode,
            "cell_id": done.cell_id if done is not None else inp.get("cell_id"),
            "error": "",
            "notebook_path": inp.get("notebook_path", ""),
            "original_file": before,
            "updated_file": after,
        }

    @classmethod
    def edited(cls, inp: dict[str, Any], current: str | None) -> str | None:
        try:
            return apply(current, inp).text if current is not None else None
        except ToolError:
            return None

    @classmethod
    def change_lines(cls, inp: dict[str, Any]) -> list[str]:
        mode = inp.get("edit_mode") or "replace"
        if mode == "delete":
            return [f"-cell {inp.get('cell_id')}"]
        return snippet_diff("", str(inp.get("new_source", "")))
