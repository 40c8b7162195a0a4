"""What a hook is given: its event JSON on stdin, and its environment, in Claude Code 2.1.332's shapes.

Every event carries ``session_id``, ``transcript_path`` (:mod:`speculate.hooks.transcript`), ``cwd`` and
``hook_event_name``; every event but SessionStart, PreCompact and SessionEnd ``permission_mode``; every event after
the first prompt ``prompt_id`` (one per prompt, as Claude Code sends it). PostToolUse carries
``tool_response``, the tool's result as an object in Claude Code's shape for that tool, which the tool
declares (:meth:`speculate.tools.base.Tool.hook_response`; the built-in tools' shapes are listed in
:mod:`speculate.tools.shapes`); an MCP tool's is the result's content as the model saw it. They are built only
when a PostToolUse hook will read them.
"""

from __future__ import annotations

from typing import Any

from speculate import FileSystem, __version__
from speculate.types import Block


def hook_env(*, project: str, session_id: str) -> dict[str, str]:
    """The variables a hook finds besides the session's (or, in a fork, the sandbox's) environment."""
    return {
        "CLAUDE_PROJECT_DIR": project,
        "CLAUDECODE": "1",
        "CLAUDE_CODE_SESSION_ID": session_id,
        "AI_AGENT": f"speculate_{__version__}",
    }


def common_fields(
    event: str, *, session_id: str, transcript_path: str, cwd: str, prompt_id: str | None, mode: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"session_id": session_id, "transcript_path": transcript_path, "cwd": cwd}
    if prompt_id is not None:
        out["prompt_id"] = prompt_id
    if event not in ("SessionStart", "SessionEnd", "PreCompact"):
        out["permission_mode"] = mode
    out["hook_event_name"] = event
    return out


async def file_text(fs: FileSystem, path: str) -> str | None:
    """A file's text as the tools read it, or None (missing, binary, outside the project)."""
    from speculate.tools.base import ToolError, run_io
    from speculate.tools.common import read_text, relative

    def read() -> str | None:
        try:
            return read_text(fs, relative(fs, path))
        except (ToolError, OSError):
            return None

    return await run_io(read)


def tool_response(
    name: str, inp: dict[str, Any], result: Block, *, before: str | None, after: str | None, duration_ms: int
) -> Any:
    """The PostToolUse ``tool_response`` for a successful call (``before``/``after``: the file's text around
    a writing tool's call, or a Read's file): the tool's own shape (:meth:`Tool.hook_response`), or for an
    MCP tool the result's content as the model saw it."""
    from speculate.tools import registry

    content = result.get("content", "")
    tool = registry.get(name)
    if tool is None:
        return content  # an MCP tool: what the model saw
    return tool.hook_response(inp, content, before=before, after=after, duration_ms=duration_ms)
