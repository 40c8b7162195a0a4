"""MCP servers that misbehave, for real (tests/mcp/server.py over stdio): one that crashes is restarted with a
backoff and a bounded number of times, and one that prints to stdout gets a log line per bad line, no
tracebacks, and is disconnected after a bound."""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio

from speculate.mcp import connect_servers, load_mcp_config
from speculate.mcp.connection import MAX_BAD_LINES, MAX_RESTARTS
from speculate.mcp.tool import McpTool
from speculate.tools.base import ToolContext, ToolError

SERVER = Path(__file__).with_name("server.py")
NOISY = Path(__file__).with_name("noisy_server.py")


def project(tmp: Path, server: Path = SERVER) -> Path:
    root = tmp / "proj"
    root.mkdir()
    (root / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "demo": {
                        "command": sys.executable,
                        "args": [str(server)],
                        "env": {"DEMO_COUNTER": str(tmp / "counter")},
                    }
                }
            }
        )
    )
    return root


def ctx(tmp: Path) -> ToolContext:
    return ToolContext(fs=None, shell=None, spill_dir=tmp / "spill")  # type: ignore[arg-type]


async def call(tools: dict[str, McpTool], name: str, tmp: Path, **args: object) -> str:
    tool = tools[f"mcp__demo__{name}"]
    res = await tool.call(tool.parse(args), ctx(tmp))
    return str(res.content)


@pytest.mark.slow
def test_a_server_that_crashes_is_restarted_a_bounded_number_of_times(tmp_path: Path) -> None:
    root = project(tmp_path)

    async def main() -> None:
        async with AsyncExitStack() as stack:
            servers = await connect_servers(load_mcp_config(root), stack)
            tools = {t.name: t for t in servers.tools}
            assert await call(tools, "lookup", tmp_path, word="alpha") == "the first letter"
            # Dies during a call: that call fails (it may have had effects: not repeated), the next one works.
            with pytest.raises(
                ToolError, match="MCP server demo stopped during the call; it is being restarted"
            ):
                await call(tools, "crash", tmp_path)
            assert await call(tools, "lookup", tmp_path, word="gamma") == "the third letter"
            # Dies between calls: noticed by its closed output, restarted before the next call needs it.
            assert await call(tools, "crash_soon", tmp_path) == "bye"
            conn = servers.servers[0].client
            with trio.fail_after(10):  # the server exits 0.2 s later; wait until its end is seen
                while conn.restarts < 2:
                    await trio.sleep(0.02)
            assert await call(tools, "lookup", tmp_path, word="alpha") == "the first letter"
            assert conn.restarts == 2 and len(servers.events) == 2
            assert (
                servers.events[0].startswith("MCP server demo stopped")
                and "restarting it in 0.5 s" in servers.events[0]
            )
            # A server that keeps dying is given up, with one line saying so.
            for _ in range(MAX_RESTARTS):
                with pytest.raises(ToolError):
                    await call(tools, "crash", tmp_path)
            with pytest.raises(ToolError, match="given up after 6 restarts"):
                await call(tools, "lookup", tmp_path, word="alpha")
            assert conn.gone is not None and "given up" in servers.events[-1]
        log = Path(servers.stderr_log)  # kept: the events point at it
        assert "restarting it in" in log.read_text()
        log.unlink()

    trio.run(main)


@pytest.mark.slow
def test_a_server_printing_to_stdout_is_logged_line_by_line_and_disconnected(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, NOISY)  # prints "debug: tick N" to stdout every millisecond

    async def main() -> None:
        async with AsyncExitStack() as stack:
            servers = await connect_servers(load_mcp_config(root), stack)
            conn = servers.servers[0].client
            with trio.fail_after(10):
                while conn.gone is None:
                    await trio.sleep(0.05)
            assert conn.gone == f"wrote {MAX_BAD_LINES} lines to stdout that are not JSON-RPC; disconnected"
            with pytest.raises(ToolError, match="MCP server demo is not connected: it wrote 20 lines"):
                await call({t.name: t for t in servers.tools}, "lookup", tmp_path, word="alpha")
            await trio.sleep(0.5)  # the server is stopped: nothing more arrives
        log = Path(servers.stderr_log).read_text()
        bad = [line for line in log.splitlines() if "is not JSON-RPC" in line]
        assert len(bad) == MAX_BAD_LINES and "stdout line 1 is not JSON-RPC: 'debug: tick 0'" in bad[0]
        assert len(log) < 10_000
        Path(servers.stderr_log).unlink()

    trio.run(main)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Failed to parse" not in err
