"""One MCP server tool as a :class:`speculate.tools.Tool`, and its results as ``tool_result`` content."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from speculate.tools.base import Tool, ToolContext, ToolError, ToolResult
from speculate.tools.common import spill

CALL_TIMEOUT_S = 120.0
MAX_NAME = 128  # the API's limit on a tool name
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters the API refuses in a tool name replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{tool}")[:MAX_NAME]


class McpArgs(BaseModel):
    """Any JSON object: the server validates the arguments against its own schema."""

    model_config = ConfigDict(extra="allow")


class McpTool(Tool):
    """A server's tool; ``read_only`` is what the user declared in settings, never the server's hint;
    ``client``: the server's :class:`~speculate.mcp.connection.McpConnection` (anything with its
    ``call_tool``)."""

    Input: ClassVar[type[BaseModel]] = McpArgs

    def __init__(self, *, server: str, spec: Any, client: Any, read_only: bool = False) -> None:
        self.name = tool_name(server, spec.name)
        self.description = spec.description or f"{spec.name} (MCP server {server})"
        self.server, self.remote_name, self.client = server, spec.name, client
        self.input_schema = spec.input_schema or {"type": "object", "properties": {}}
        self.read_only = read_only
        hints = spec.annotations
        self.read_only_hint = bool(hints is not None and hints.read_only_hint)

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def parse(self, raw: Any) -> BaseModel:
        if not isinstance(raw, dict):
            raise ToolError(f"Invalid input for {self.name}: input: expected a JSON object")
        return McpArgs.model_validate(raw)

    def is_read_only(self, inp: BaseModel) -> bool:
        return self.read_only

    async def call(self, inp: BaseModel, ctx: ToolContext) -> ToolResult:
        from mcp import MCPError

        from speculate.mcp.connection import ServerGone

        try:
            res = await self.client.call_tool(
                self.remote_name, inp.model_dump(), read_timeout_seconds=CALL_TIMEOUT_S
            )
        except MCPError as e:  # the server answered with a protocol error (unknown tool, bad arguments)
            raise ToolError(f"MCP server {self.server}: {e}") from None
        except ServerGone as e:  # crashed, restarting, or given up (speculate.mcp.connection)
            raise ToolError(str(e)) from None
        return ToolResult(
            to_content(res, ctx, tool=self.name, limit=self.max_result_chars), is_error=bool(res.is_error)
        )


def to_content(res: Any, ctx: ToolContext, *, tool: str, limit: int) -> str | list[dict[str, Any]]:
    """A CallToolResult as tool_result content: a string when it is all text, else text and image blocks."""
    blocks: list[dict[str, Any]] = []
    for c in res.content:
        kind = getattr(c, "type", "")
        if kind == "text":
            blocks.append({"type": "text", "text": c.text})
        elif kind == "image" and c.mime_type in IMAGE_TYPES:
            blocks.append(
                {"type": "image", "source": {"type": "base64", "media_type": c.mime_type, "data": c.data}}
            )
        elif kind == "resource":
            r = c.resource
            body = (
                r.text if hasattr(r, "text") else f"({len(r.blob) * 3 // 4} bytes of {r.mime_type or 'data'})"
            )
            blocks.append({"type": "text", "text": f"[resource {r.uri}]\n{body}"})
        elif kind == "resource_link":
            blocks.append({"type": "text", "text": f"[resource link {c.uri}] {c.description or c.name}"})
        else:  # audio, images the API does not take, and types newer than this client
            blocks.append(
                {"type": "text", "text": f"[{kind} content ({getattr(c, 'mime_type', '')}) not shown]"}
            )
    if not blocks and res.structured_content is not None:
        blocks.append({"type": "text", "text": json.dumps(res.structured_content)})
    if all(b["type"] == "text" for b in blocks):
        return spill("\n".join(b["text"] for b in blocks) or "(no output)", ctx, tool=tool, limit=limit)
    return [
        {"type": "text", "text": spill(b["text"], ctx, tool=tool, limit=limit)} if b["type"] == "text" else b
        for b in blocks
    ]
