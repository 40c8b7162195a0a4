"""Connecting the configured MCP servers for one session.

Each server gets a :class:`~speculate.mcp.connection.McpConnection`, a task in a nursery entered into the
caller's :class:`AsyncExitStack`, so the connections close with the session; the task keeps its server
connected (restarting it after a crash). A server that fails to start, or to answer, is left out with a
note; the others are used.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Collection
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import trio

from speculate.mcp.config import HttpServer, McpConfig, StdioServer
from speculate.mcp.connection import McpConnection, watched
from speculate.mcp.tool import McpTool
from speculate.tempfiles import temp_file

INSTRUCTIONS_CAP = 2048  # characters per server, as Claude Code caps them
REQUEST_TIMEOUT_S = 30.0  # the handshake and tools/list


@dataclass
class McpServer:
    name: str
    client: McpConnection
    tools: list[McpTool]
    instructions: str = ""


@dataclass
class McpServers:
    servers: list[McpServer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said once, at the start
    stderr_log: str = ""  # where the stdio servers' stderr goes (not the terminal), and our lines about them
    events: list[str] = field(default_factory=list)  # what happened later: restarts, disconnections

    @property
    def tools(self) -> list[McpTool]:
        return [t for s in self.servers for t in s.tools]

    def instructions(self) -> str:
        """The servers' instructions for the system prompt, each capped at 2048 characters."""
        return "\n".join(
            f"## {s.name}\n{s.instructions[:INSTRUCTIONS_CAP].rstrip()}\n"
            for s in self.servers
            if s.instructions.strip()
        )


@asynccontextmanager
async def _transport(spec: StdioServer | HttpServer, errlog: TextIO) -> AsyncIterator[Any]:
    if isinstance(spec, StdioServer):
        from mcp import StdioServerParameters, stdio_client
        from mcp.client.stdio import get_default_environment

        params = StdioServerParameters(
            command=spec.command, args=spec.args, env={**get_default_environment(), **spec.env}
        )
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # A client we pass in is ours to close, after the transport's session.
    async with (
        httpx2.AsyncClient(
            headers=spec.headers, timeout=httpx2.Timeout(REQUEST_TIMEOUT_S, read=300.0)
        ) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


async def connect_servers(
    config: McpConfig, stack: AsyncExitStack, *, read_only: Collection[str] = ()
) -> McpServers:
    """Connect every server of ``config`` into ``stack``; ``read_only``: tool names the user declared
    read-only (settings ``speculation.readOnlyMcpTools``)."""
    from mcp import Client

    # The servers' stderr goes to a file, not the terminal; it is kept after the session only when a
    # server failed to connect or misbehaved later (the note points at it).
    fd, log = temp_file("mcp", ".log")
    out = McpServers(stderr_log=log)

    def drop_quiet_log() -> None:
        if not (out.notes or out.events):
            os.unlink(log)

    stack.callback(drop_quiet_log)
    errlog = stack.enter_context(os.fdopen(fd, "w"))
    nursery = await stack.enter_async_context(trio.open_nursery())
    stack.callback(nursery.cancel_scope.cancel)  # runs first: the connections close, then the nursery

    def note(line: str) -> None:
        out.events.append(f"{line} (log: {log})")

    for name in sorted(config.servers):
        spec = config.servers[name]
        where = f"MCP server {name} ({config.sources.get(name, '.mcp.json')})"

        def open_client(conn: McpConnection, spec: StdioServer | HttpServer = spec) -> Any:
            return Client(
                watched(_transport(spec, errlog), conn), read_timeout_seconds=REQUEST_TIMEOUT_S, mode="legacy"
            )

        conn = McpConnection(name, open_client=open_client, log=errlog, note=note)
        await nursery.start(conn.run)
        if conn.gone is not None:
            out.notes.append(f"{where} {conn.gone} (its stderr: {log})")
            continue
        tools = [McpTool(server=name, spec=t, client=conn) for t in sorted(conn.specs, key=lambda t: t.name)]
        for t in tools:
            t.read_only = t.name in read_only
        out.servers.append(McpServer(name, conn, tools, conn.instructions))
    known = {t.name for t in out.tools}
    for n in sorted(set(read_only) - known):
        out.notes.append(f"settings speculation.readOnlyMcpTools: no connected server offers {n}")
    return out
