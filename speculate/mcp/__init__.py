"""MCP tools: the servers of ``.mcp.json`` (Claude Code's format), connected with the official ``mcp`` SDK
(on anyio, so under trio), and their tools offered to the model as ``mcp__<server>__<tool>``.

:mod:`.config` parses the config files; :mod:`.client` connects the servers (stdio and streamable HTTP)
into an async exit stack the session owns; :mod:`.connection` keeps each one connected (a restart after a
crash, bounded; a server that writes non-JSON to stdout is disconnected after a bound); :mod:`.tool` adapts each server tool to a
:class:`speculate.tools.Tool` and maps its results to ``tool_result`` blocks (text, images, errors).
In a speculative fork every MCP call is a boundary (``mcp``) unless the user's settings declare the tool
read-only (``speculation.readOnlyMcpTools``); a server's own ``readOnlyHint`` is only a hint. Tools a
deny rule refuses wholly (``mcp__server``, ``mcp__server__*``, ``mcp__server__tool``) are not offered.
"""

from speculate.mcp.client import McpServers, connect_servers
from speculate.mcp.config import McpConfig, McpConfigError, load_mcp_config
from speculate.mcp.tool import McpTool, tool_name

__all__ = [
    "McpConfig",
    "McpConfigError",
    "McpServers",
    "McpTool",
    "connect_servers",
    "load_mcp_config",
    "tool_name",
]
