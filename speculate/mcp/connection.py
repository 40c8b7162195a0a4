"""One MCP server's connection for a whole session: kept up by a task of its own, restarted after a crash.

:class:`McpConnection` runs in a nursery the session owns (so no server outlives it) and owns its
``mcp.Client``: anyio's task groups must be exited by the task that entered them, so a tool call never
connects; it waits for the supervisor instead. After the server dies (its stdout closes, or a call finds the
connection gone) the supervisor reconnects with a backoff, a bounded number of times; a call that was running
when the server died fails (it may have had effects: it is not repeated). A server that writes lines to stdout
that are not JSON-RPC gets one log line per such line and is disconnected after :data:`MAX_BAD_LINES` (the SDK
would log a traceback for each; a chatty server produced 128,986 of them in 35 s).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
import trio

from speculate.errors import SpeculateError

RECONNECT_DELAYS_S = (0.5, 1.0, 2.0)  # backoff between attempts after one loss of the connection
MAX_RESTARTS = 5  # losses per session before the server is given up
MAX_BAD_LINES = 20  # stdout lines that are not JSON-RPC before the server is disconnected
WAIT_FOR_SERVER_S = 30.0  # a call waits at most this long for a reconnect in progress
_SDK_PARSE_FAILURE = "Failed to parse JSONRPC message from server"


class _NoParseTracebacks(logging.Filter):
    """The SDK logs every unparsable stdout line with a traceback; the connection reports them itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _SDK_PARSE_FAILURE


logging.getLogger("mcp.client.stdio").addFilter(_NoParseTracebacks())


class ServerGone(SpeculateError):
    """The server cannot be reached any more; the message says why (for the tool result)."""


def _why(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _bad_line(e: Exception) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            value = errors()[0].get("input")
        except Exception:  # an error object of another shape: say what it is
            value = None
        if isinstance(value, str):
            return repr(value[:120])
    return _why(e)[:160]


class McpConnection:
    """``open_client()``: a fresh ``mcp.Client`` (an async context manager) for this server; ``log``: the
    session's MCP log (the servers' stderr goes there too); ``note``: one line for the user's notes."""

    def __init__(
        self, name: str, *, open_client: Callable[[Any], Any], log: TextIO, note: Callable[[str], None]
    ) -> None:
        self.name, self._open, self._log, self._note = name, open_client, log, note
        self.client: Any = None  # the live mcp.Client, or None while (re)connecting or once gone
        self.specs: list[Any] = []  # the tools/list of the first connection (the session keeps these)
        self.instructions = ""
        self.gone: str | None = None  # why the server was given up
        self.restarts = 0
        self.bad_lines = 0
        self._lost = trio.Event()
        self._lost_why = ""
        self._changed = trio.Event()  # set (and replaced) whenever client or gone changes
        self._closing = False

    # -- the supervisor -------------------------------------------------------------------------------------
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, then keep the connection up until cancelled; ``started`` after the first attempt."""
        started = False
        failures = 0
        try:
            while True:
                try:
                    async with self._open(self) as client:
                        if not started:
                            self.specs = await _list_tools(client)
                            self.instructions = client.instructions or ""
                        self._set(client)
                        failures = 0
                        if not started:
                            started = True
                            task_status.started()
                        await self._lost.wait()
                        why = self._lost_why
                except Exception as e:  # a user's server failing in any way: said once, never raised
                    if not started:
                        self.gone = f"did not connect: {_why(e)}"
                        task_status.started()
                        return
                    why, failures = f"could not be restarted: {_why(e)}", failures + 1
                finally:
                    self._set(None)
                    self._lost = trio.Event()
                if self.bad_lines >= MAX_BAD_LINES:
                    # the threshold, not the count: lines already in the pipe keep arriving while the
                    # server is wound down, so the count races the stop (CI saw 21)
                    return self._give_up(
                        f"wrote {MAX_BAD_LINES} lines to stdout that are not JSON-RPC; disconnected"
                    )
                if failures == 0:
                    self.restarts += 1
                if self.restarts > MAX_RESTARTS or failures >= len(RECONNECT_DELAYS_S):
                    return self._give_up(f"{why}; given up after {self.restarts} restarts")
                delay = RECONNECT_DELAYS_S[failures]
                self._say(f"MCP server {self.name} {why}; restarting it in {delay:g} s")
                await trio.sleep(delay)
        finally:
            self._closing = True
            self._set(None)

    def _give_up(self, why: str) -> None:
        self.gone = why
        self._say(f"MCP server {self.name} {why}; its tools fail for the rest of the session")
        self._set(None)

    def _set(self, client: Any) -> None:
        self.client = client
        self._changed.set()
        self._changed = trio.Event()

    def _say(self, line: str) -> None:
        self.log_line(line)
        self._note(line)

    def log_line(self, line: str) -> None:
        try:
            self._log.write(f"{time.strftime('%H:%M:%S')} {line}\n")
            self._log.flush()
        except (OSError, ValueError):  # the log is closed: the session is ending
            pass

    def lose(self, why: str) -> None:
        """The connection is gone (EOF on stdout, a failed call, too many bad lines): reconnect."""
        if not self._closing and not self._lost.is_set():
            self._lost_why = why
            self._lost.set()
            self._set(None)  # no call takes the dead client while the supervisor winds it down

    def bad_line(self, e: Exception) -> None:
        self.bad_lines += 1
        if self.bad_lines <= MAX_BAD_LINES:
            self.log_line(
                f"MCP server {self.name}: stdout line {self.bad_lines} is not JSON-RPC: {_bad_line(e)}"
            )
        if self.bad_lines == MAX_BAD_LINES:
            self.lose("wrote lines to stdout that are not JSON-RPC")

    # -- what a tool call uses ------------------------------------------------------------------------------
    async def current(self) -> Any:
        """The live client, waiting (bounded) for a reconnect in progress; ServerGone if there is none."""
        with trio.move_on_after(WAIT_FOR_SERVER_S):
            while self.client is None and self.gone is None and not self._closing:
                await self._changed.wait()
        if self.client is None:
            raise ServerGone(
                f"MCP server {self.name} is not connected"
                + (f": it {self.gone}" if self.gone else " (still restarting)")
            )
        return self.client

    async def call_tool(self, name: str, arguments: dict[str, Any], *, read_timeout_seconds: float) -> Any:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = await self.current()
        try:
            return await client.call_tool(name, arguments, read_timeout_seconds=read_timeout_seconds)
        except MCPError as e:
            if e.error.code != CONNECTION_CLOSED:
                raise  # the server answered with a protocol error: the connection is fine
            self.lose("stopped")
            raise ServerGone(
                f"MCP server {self.name} stopped during the call; it is being restarted for the next call"
            ) from None
        except (
            OSError,
            EOFError,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.EndOfStream,
        ) as e:
            self.lose(f"stopped ({type(e).__name__} during a call)")
            raise ServerGone(
                f"MCP server {self.name} stopped during the call ({type(e).__name__}); it is being "
                "restarted for the next call"
            ) from None


async def _list_tools(client: Any) -> list[Any]:
    specs, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        specs += page.tools
        if not (cursor := page.next_cursor):
            return specs


@asynccontextmanager
async def watched(transport: Any, conn: McpConnection) -> AsyncIterator[tuple[Any, Any]]:
    """``transport`` (an MCP transport: an async context manager of read and write streams) with its read side
    watched: lines that are not JSON-RPC go to ``conn.bad_line`` instead of the session, and the end of the
    stream (the server died) tells ``conn`` to reconnect."""
    async with transport as (read, write):
        send, recv = anyio.create_memory_object_stream[Any](0)
        async with anyio.create_task_group() as tg:

            async def pump() -> None:
                try:
                    async with send:
                        async for item in read:
                            if isinstance(item, Exception):
                                conn.bad_line(item)
                            else:
                                await send.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # our side closed: the session is ending or reconnecting
                conn.lose("stopped (its output closed)")

            tg.start_soon(pump)
            try:
                yield recv, write
            finally:
                tg.cancel_scope.cancel()
