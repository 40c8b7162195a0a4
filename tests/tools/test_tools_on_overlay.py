"""The tools only touch the project through ctx.fs: handed an Overlay, they leave the real tree untouched,
see their own writes, and Grep's Python backend over the overlay agrees with ripgrep on the real tree."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from overlayfs import Overlay
from speculate.fs import LocalShell
from speculate.tools.base import ToolContext, ToolResult

Call = Callable[[str, dict[str, Any], ToolContext], ToolResult]


@pytest.fixture
def overlay_ctx(project: Path, tmp_path: Path) -> Iterator[ToolContext]:
    ov = Overlay(project)
    try:
        yield ToolContext(fs=ov, shell=LocalShell(project), spill_dir=tmp_path / "spill")
    finally:
        ov.discard()


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_file_tools_write_only_to_the_overlay(project: Path, overlay_ctx: ToolContext, call: Call) -> None:
    before = _snapshot(project)
    ctx, root = overlay_ctx, project.resolve()
    assert not call("Write", {"file_path": f"{root}/new/mod.py", "content": "VALUE = 1\n"}, ctx).is_error
    edit = {"file_path": "src/pkg/core.py", "old_string": "a + b", "new_string": "a + b + VALUE"}
    assert not call("Edit", edit, ctx).is_error
    assert "a + b + VALUE" in call("Read", {"file_path": "src/pkg/core.py"}, ctx).content
    globbed = call("Glob", {"pattern": "**/*.py"}, ctx).content.splitlines()
    assert sorted(globbed) == [f"{root}/new/mod.py", f"{root}/src/pkg/core.py", f"{root}/src/pkg/util.py"]
    assert (
        f"{root}/new/mod.py:1:VALUE = 1"
        in call("Grep", {"pattern": "VALUE", "output_mode": "content"}, ctx).content.splitlines()
    )
    assert _snapshot(project) == before  # the real tree is untouched


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not on PATH")
def test_grep_on_overlay_matches_ripgrep_on_real_tree(
    project: Path, ctx: ToolContext, overlay_ctx: ToolContext, call: Call
) -> None:
    for inp in (
        {"pattern": "TODO", "output_mode": "content"},
        {"pattern": "o", "output_mode": "count", "glob": "*.py"},
    ):
        real = call("Grep", inp, ctx).content.replace(str(project), "<root>")
        over = call("Grep", inp, overlay_ctx).content.replace(str(project.resolve()), "<root>")
        assert real == over and "<root>" in real
