"""The Bash tool through a real LocalShell: output, exit codes, timeouts, caps, and its read-only flag."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from speculate.tools import tools_by_name
from speculate.tools.base import ToolContext, ToolResult

Call = Callable[[str, dict[str, Any], ToolContext], ToolResult]


def test_output_and_exit_codes(ctx: ToolContext, project: Path, call: Call) -> None:
    res = call("Bash", {"command": "ls src; echo warn >&2", "description": "list"}, ctx)
    assert not res.is_error and res.content == "pkg\nwarn"
    res = call("Bash", {"command": "echo partial; exit 7"}, ctx)
    assert res.is_error and res.content == "partial\nExit code 7"
    res = call("Bash", {"command": "true"}, ctx)
    assert not res.is_error and res.content == "(no output)"
    res = call("Bash", {"command": "touch made.txt"}, ctx)
    assert (project / "made.txt").exists()  # runs in the project root


def test_timeout_reported(ctx: ToolContext, call: Call) -> None:
    res = call("Bash", {"command": "echo before; sleep 20", "timeout_ms": 300}, ctx)
    assert res.is_error and res.content == "before\nCommand timed out after 0.3 s and was killed"


def test_invalid_input(ctx: ToolContext, call: Call) -> None:
    res = call("Bash", {"command": "ls", "timeout_ms": 600_001}, ctx)
    assert res.is_error and "timeout_ms" in res.content
    res = call("Bash", {"command": ""}, ctx)
    assert res.is_error and "command" in res.content


def test_big_output_is_spilled(ctx: ToolContext, call: Call) -> None:
    res = call("Bash", {"command": "seq 1 20000"}, ctx)
    (saved,) = ctx.spill_dir.iterdir()
    full = saved.read_text()
    assert full.splitlines() == [str(i) for i in range(1, 20001)]
    assert res.content.startswith(f"Output too large ({len(full)} chars, 20000 lines)")
    assert str(saved) in res.content.splitlines()[0]


@pytest.mark.parametrize(
    ("command", "read_only"),
    [
        ("ls -la", True),
        ("git status", True),
        ("cat README.md | head -3", True),
        ("rm -rf src", False),
        ("echo x > f", False),
    ],
)
def test_read_only_follows_classifier(command: str, read_only: bool) -> None:
    bash = tools_by_name()["Bash"]
    inp = bash.parse({"command": command})
    assert bash.is_read_only(inp) is read_only
    assert bash.is_concurrency_safe(inp) is read_only
