"""Fixtures for the tools tests: a real temporary project, a LocalFS/LocalShell context, a trio runner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.fs import LocalFS, LocalShell
from speculate.tools import tools_by_name
from speculate.tools.base import ToolContext, ToolError, ToolResult


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "src" / "pkg" / "util.py").write_text("import os\n\nTODO = 'x'\n")
    (root / "README.md").write_text("# Demo\nTODO: write docs\n")
    return root


@pytest.fixture
def ctx(project: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(fs=LocalFS(project), shell=LocalShell(project), spill_dir=tmp_path / "spill")


Call = Callable[[str, dict[str, Any], ToolContext], ToolResult]


def run_tool(name: str, raw: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Run one tool call as the loop does: validate, call, and turn a ToolError into an is_error result."""
    tool = tools_by_name()[name]

    async def go() -> ToolResult:
        try:
            return await tool.call(tool.parse(raw), ctx)
        except ToolError as e:
            return ToolResult(str(e), is_error=True)

    return trio.run(go)


@pytest.fixture
def call() -> Call:
    """``call(tool_name, raw_input, ctx) -> ToolResult``, run under trio."""
    return run_tool
