"""Connecting the configured MCP servers for one session.

Each server is connected in the caller's task and entered into the caller's :class:`AsyncExitStack`
(anyio's task groups must be exited by the task that entered them), so the connections close with the
session. A server that fails to start, or to answer, is left out with a note; the others are used.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from speculate.mcp.config import HttpServer, McpConfig, StdioServer
from speculate.mcp.tool import McpTool

INSTRUCTIONS_CAP = 2048  # characters per server, as Claude Code caps them
REQUEST_TIMEOUT_S = 30.0  # the handshake and tools/list


@dataclass
class McpServer:
    name: str
    client: Any  # mcp.Client
    tools: list[McpTool]
    instructions: str = ""


@dataclass
class McpServers:
    servers: list[McpServer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stderr_log: str = ""  # where the stdio servers' stderr goes (not the terminal)

    @property
    def tools(self) -> list[McpTool]:
        return [t for s in self.servers for t in s.tools]

    def instructions(self) -> str:
        """The servers' instructions for the system prompt, each capped at 2048 characters."""
        return "\n".join(f"## {s.name}\n{s.instructions[:INSTRUCTIONS_CAP].rstrip()}\n"
                         for s in self.servers if s.instructions.strip())


def _transport(spec: StdioServer | HttpServer, errlog: Any, stack: AsyncExitStack) -> Any:
    if isinstance(spec, StdioServer):
        from mcp import StdioServerParameters, stdio_client
        from mcp.client.stdio import get_default_environment

        params = StdioServerParameters(command=spec.command, args=spec.args,
                                       env={**get_default_environment(), **spec.env})
        return stdio_client(params, errlog=errlog)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=spec.headers, timeout=httpx2.Timeout(REQUEST_TIMEOUT_S, read=300.0))
    stack.push_async_callback(http.aclose)  # a client we pass in is ours to close, after the session's
    return streamable_http_client(spec.url, http_client=http)


async def connect_servers(config: McpConfig, stack: AsyncExitStack, *,
                          read_only: Collection[str] = ()) -> McpServers:
    """Connect every server of ``config`` into ``stack``; ``read_only``: tool names the user declared
    read-only (settings ``speculation.readOnlyMcpTools``)."""
    from mcp import Client

    # The servers' stderr goes to a file, not the terminal; it is kept after the session only when a
    # server failed to connect (the note points at it).
    fd, log = tempfile.mkstemp(prefix="speculate-mcp-", suffix=".log")
    out = McpServers(stderr_log=log)
    stack.callback(lambda: out.notes or os.unlink(log))
    errlog = stack.enter_context(os.fdopen(fd, "w"))
    for name in sorted(config.servers):
        spec = config.servers[name]
        where = f"MCP server {name} ({config.sources.get(name, '.mcp.json')})"
        try:
            client = await stack.enter_async_context(
                Client(_transport(spec, errlog, stack), read_timeout_seconds=REQUEST_TIMEOUT_S, mode="legacy"))
            specs, cursor = [], None
            while True:
                page = await client.list_tools(cursor=cursor)
                specs += page.tools
                if not (cursor := page.next_cursor):
                    break
        except Exception as e:  # any failure of a user's server leaves it out, said once
            out.notes.append(f"{where} did not connect: {_why(e)} (its stderr: {log})")
            continue
        tools = [McpTool(server=name, spec=t, client=client) for t in sorted(specs, key=lambda t: t.name)]
        for t in tools:
            t.read_only = t.name in read_only
        out.servers.append(McpServer(name, client, tools, client.instructions or ""))
    known = {t.name for t in out.tools}
    for n in sorted(set(read_only) - known):
        out.notes.append(f"settings speculation.readOnlyMcpTools: no connected server offers {n}")
    return out


def _why(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
