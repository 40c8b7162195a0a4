"""Every backend has connect and read timeouts with stated defaults and a message: a silent endpoint (no
headers ever, or a stream that stops) ends the request after its read timeout, retried a bounded number of
times with a notice each time, never after the SDK's ten minutes."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from pathlib import Path

import pytest
import trio

from speculate.models.anthropic import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, STALL_ATTEMPTS, AnthropicModel
from speculate.models.base import CacheKey, Done, ModelError
from speculate.models.claude_cli import ClaudeCliModel
from speculate.sim.faults import FaultConfig
from speculate.sim.server import SimServer
from speculate.types import user

KEY = CacheKey.build(model="claude-sonnet-4-6", system="s", tools=[])


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """A TCP server that accepts connections and reads requests, and never answers a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            held.append(conn)

    t = threading.Thread(target=accept)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


async def drain(model: AnthropicModel) -> None:
    async with aclosing(model.stream(KEY, [user("hi")])) as s:
        async for u in s:
            if isinstance(u, Done):
                return


def test_the_defaults_are_stated() -> None:
    assert (CONNECT_TIMEOUT_S, READ_TIMEOUT_S, STALL_ATTEMPTS) == (10.0, 60.0, 2)


def test_an_endpoint_that_never_sends_headers_fails_after_the_read_timeout_with_notices() -> None:
    notices: list[str] = []

    async def main() -> None:
        with silent_endpoint() as url:
            async with AnthropicModel(
                base_url=url, api_key="x", backoff_s=0.01, read_timeout_s=0.5, on_notice=notices.append
            ) as model:
                t0 = time.perf_counter()
                with pytest.raises(ModelError) as err:
                    await drain(model)
                took = time.perf_counter() - t0
        assert took < 5, took  # two tries of 0.5 s, not the SDK's 600 s
        msg = str(err.value)
        assert f"the model endpoint ({url}) sent nothing for 0.5 s (read timeout)" in msg
        assert "gave up after 2 attempt(s)" in msg and "--read-timeout" in msg
        assert notices == [
            f"the model endpoint ({url}) sent nothing for 0.5 s (read timeout); retrying (attempt 2 of 2)"
        ]

    trio.run(main)


def test_a_stream_that_stalls_midway_is_retried_then_reported() -> None:
    notices: list[str] = []

    async def main() -> None:
        faults = FaultConfig(stall_rate=1.0, stall_s=100_000.0)
        with SimServer([], time_scale=0.001, faults=faults) as sim:
            async with AnthropicModel(
                base_url=sim.base_url,
                api_key="x",
                backoff_s=0.01,
                read_timeout_s=0.5,
                on_notice=notices.append,
            ) as model:
                with pytest.raises(
                    ModelError, match=r"sent nothing for 0.5 s \(read timeout\); gave up after 2"
                ):
                    await drain(model)
        assert len(notices) == 1

    trio.run(main)


def test_the_claude_cli_gets_bounded_retries_and_timeouts_unless_the_user_set_them(tmp_path: Path) -> None:
    """The CLI retries ten times by default (175 s of silence on a dead endpoint): each run gets
    API_TIMEOUT_MS and CLAUDE_CODE_MAX_RETRIES, the user's own values winning; a failure names them."""
    script = tmp_path / "claude"
    script.write_text('#!/bin/sh\necho "$API_TIMEOUT_MS $CLAUDE_CODE_MAX_RETRIES" >&2\nexit 1\n')
    script.chmod(0o755)

    async def main() -> None:
        model = ClaudeCliModel(binary=script, env={"PATH": os.environ["PATH"]}, cwd=tmp_path, validators={})
        with pytest.raises(ModelError) as err:
            await drain(model)  # type: ignore[arg-type]
        assert "60000 1" in str(err.value) and "(API_TIMEOUT_MS=60000, CLAUDE_CODE_MAX_RETRIES=1)" in str(
            err.value
        )
        mine = ClaudeCliModel(
            binary=script,
            env={"PATH": os.environ["PATH"], "API_TIMEOUT_MS": "5000"},
            cwd=tmp_path,
            validators={},
            stall_attempts=4,
        )
        with pytest.raises(ModelError, match="5000 3"):
            await drain(mine)  # type: ignore[arg-type]

    trio.run(main)


@pytest.mark.slow
def test_the_real_claude_cli_on_a_dead_endpoint_fails_fast_naming_its_limits(tmp_path: Path) -> None:
    from speculate.sim.claude_code import ClaudeCode

    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    (tmp_path / "home").mkdir()
    env = ClaudeCode(binary, home=tmp_path / "home").env("http://127.0.0.1:9")  # nothing listens there

    async def main() -> None:
        model = ClaudeCliModel(binary=binary, env=env, cwd=tmp_path, timeout_s=120)
        t0 = time.perf_counter()
        with pytest.raises(ModelError, match=r"API_TIMEOUT_MS=60000, CLAUDE_CODE_MAX_RETRIES=1"):
            await drain(model)  # type: ignore[arg-type]
        assert time.perf_counter() - t0 < 60  # not the CLI's ten silent retries (175 s)

    trio.run(main)
