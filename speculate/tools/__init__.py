"""The agent's tools (Read, Write, Edit, Glob, Grep, Bash, ...): pydantic inputs, a filesystem view, a shell;
each declares its capabilities, and :mod:`speculate.tools.registry` lists them and derives every set of tool
names the rest of speculate uses."""

from __future__ import annotations

from collections.abc import Iterable

from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult


def default_tools() -> list[Tool]:
    """Fresh instances of the built-in tools in a fixed order (the order is part of the prompt-cache key):
    :data:`speculate.tools.registry.TOOLS`, the one list of them."""
    from speculate.tools.registry import default_tools as fresh

    return fresh()


def tools_by_name(tools: Iterable[Tool] | None = None) -> dict[str, Tool]:
    """``{tool.name: tool}`` for ``tools`` (default: :func:`default_tools`); duplicate names are an error."""
    out: dict[str, Tool] = {}
    for tool in default_tools() if tools is None else tools:
        if tool.name in out:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        out[tool.name] = tool
    return out


__all__ = ["Tool", "ToolContext", "ToolError", "ToolResult", "default_tools", "tools_by_name"]
