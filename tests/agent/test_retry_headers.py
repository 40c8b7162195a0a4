"""The retry loop reads the server's retry headers as the SDK does: ``x-should-retry`` decides whether,
``retry-after-ms`` (then ``retry-after``, seconds or an HTTP date) how long. Driven against a real HTTP
server that answers every request with the status and headers a test queues."""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import httpx2
import pytest
import trio

from speculate.models.anthropic import AnthropicModel, _retry_after
from speculate.models.base import CacheKey, ModelError
from speculate.types import user

KEY = CacheKey.build(model="claude-sonnet-4-6", system="s", tools=[])


@contextmanager
def answering(status: int, headers: dict[str, str]) -> Iterator[tuple[str, list[float]]]:
    """A server that answers every POST with ``status``, ``headers`` and an API error body."""
    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            seen.append(time.monotonic())
            body = json.dumps({"type": "error", "error": {"type": "api_error", "message": "queued"}}).encode()
            self.send_response(status)
            for k, v in {**headers, "content-type": "application/json"}.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", seen
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


async def drain(url: str, *, attempts: int, backoff_s: float) -> None:
    async with AnthropicModel(base_url=url, max_attempts=attempts, backoff_s=backoff_s) as model:
        async with aclosing(model.stream(KEY, [user("hi")])) as s:
            async for _ in s:
                pass


def test_x_should_retry_false_stops_a_retryable_status_at_the_first_attempt() -> None:
    with answering(503, {"x-should-retry": "false"}) as (url, seen):
        with pytest.raises(ModelError, match="HTTP 503 api_error after 1 attempt"):
            trio.run(lambda: drain(url, attempts=4, backoff_s=0.01))
    assert len(seen) == 1


def test_x_should_retry_true_retries_a_client_error_after_retry_after_ms() -> None:
    # A 400 is never retried on its own; the header says to, after 5 ms. The backoff is set to 30 s, so a
    # loop that ignored retry-after-ms would not finish within the 20 s bound.
    with answering(400, {"x-should-retry": "true", "retry-after-ms": "5", "retry-after": "30"}) as (
        url,
        seen,
    ):
        with pytest.raises(ModelError, match="after 3 attempt"):
            trio.run(lambda: _bounded(drain(url, attempts=3, backoff_s=30)))
    assert len(seen) == 3


async def _bounded(coro: object) -> None:
    with trio.fail_after(20):
        await coro  # type: ignore[misc]


def error(headers: dict[str, str]) -> anthropic.APIStatusError:
    req = httpx2.Request("POST", "http://x/v1/messages")
    return anthropic.APIStatusError(
        "e", response=httpx2.Response(429, headers=headers, request=req), body=None
    )


def test_retry_after_reads_milliseconds_then_seconds_then_a_date() -> None:
    assert _retry_after(error({"retry-after-ms": "250", "retry-after": "9"})) == pytest.approx(0.25)
    assert _retry_after(error({"retry-after": "1.5"})) == pytest.approx(1.5)
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    wait = _retry_after(error({"retry-after": in_ten}))
    assert wait is not None and 5 < wait <= 10.5
    assert _retry_after(error({"retry-after": "3600"})) is None  # over the cap: the backoff applies
    assert _retry_after(error({"retry-after": "soon"})) is None
    assert _retry_after(error({})) is None
