"""The production backend: the official anthropic SDK (``AsyncAnthropic``) under trio.

Works against api.anthropic.com or any Anthropic-compatible server (``base_url``), the embedded simulator
included. The SDK's own retries are off: this backend retries 429, 529, 5xx, dropped connections and
stalled streams itself, with backoff, so that a stall mid-stream is covered too and the final failure is
one clear :class:`ModelError`.

Timeouts (every request, main loop, suggestion and fork alike): ``connect_timeout_s`` (default
:data:`CONNECT_TIMEOUT_S`) for the connection, ``read_timeout_s`` (:data:`READ_TIMEOUT_S`) without a byte,
before the response headers as well as between stream events. A request that times out is a *stall*:
tried at most ``stall_attempts`` (:data:`STALL_ATTEMPTS`) times in all, so a silent endpoint ends a turn
after about ``stall_attempts × read_timeout_s`` with an error that says so, never after the SDK's ten
minutes. Each retry is told to ``on_notice`` (the REPL prints it while a turn runs).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import Any

import anthropic
import httpx2
import trio

from speculate.errors import SpeculateError
from speculate.models.base import (
    BlockDone,
    CacheKey,
    Done,
    ModelError,
    ModelResponse,
    StreamUpdate,
    TextDelta,
)
from speculate.models.billing import cancelled_usage, charge_cancelled
from speculate.models.streaming import Snapshot, StreamProtocolError, accumulate_event
from speculate.types import Message

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}  # and any 5xx, unless x-should-retry says no
MAX_RETRY_AFTER_S = 60.0  # a longer retry-after falls back to the backoff
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
STALL_ATTEMPTS = 2
Recorder = Callable[[dict[str, Any], dict[str, Any], dict[str, float]], None]


class StreamStalled(SpeculateError):
    pass


class AnthropicModel:
    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
        stall_attempts: int = STALL_ATTEMPTS,
        recorder: Recorder | None = None,
        name: str = "anthropic",
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        if not (connect_timeout_s > 0 and read_timeout_s > 0 and stall_attempts >= 1):
            raise ValueError(
                f"timeouts must be > 0 and stall_attempts >= 1, not {connect_timeout_s}, "
                f"{read_timeout_s}, {stall_attempts}"
            )
        self.name = name
        self.base_url = base_url
        self._client = anthropic.AsyncAnthropic(
            base_url=base_url,
            api_key=api_key or "sk-none",
            max_retries=0,
            timeout=httpx2.Timeout(read_timeout_s, connect=connect_timeout_s),
        )
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        self.stall_attempts = stall_attempts
        self.recorder = recorder
        self.on_notice = on_notice

    async def __aenter__(self) -> AnthropicModel:
        await self._client.__aenter__()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._client.__aexit__(et, e, tb)

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(
        self, key: CacheKey, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncGenerator[StreamUpdate, None]:
        body = key.request(messages, max_tokens=max_tokens)
        last_error = ""
        stalls = 0
        for attempt in range(1, self.max_attempts + 1):
            # A retry after some blocks were yielded is safe: only read-only calls start early, and the
            # agent uses the tool_use ids of the final response, so an early call of a failed attempt
            # only costs a repeated read.
            try:
                async with aclosing(self._attempt(body, attempt)) as updates:
                    async for update in updates:
                        yield update
                return
            except anthropic.APIStatusError as e:
                if not _should_retry(e) or attempt == self.max_attempts:
                    raise ModelError(_describe(e, attempt)) from e
                last_error = _describe(e, attempt)
                delay = _retry_after(e) or self._backoff(attempt)
            # A connection dropped mid-stream surfaces as the transport's own error, not the SDK's.
            except (
                anthropic.APIConnectionError,
                httpx2.TransportError,
                StreamStalled,
                StreamProtocolError,
                _StreamError,
            ) as e:
                stalled = _timed_out(e)
                stalls += stalled
                what = self._describe_failure(e) if stalled else f"{type(e).__name__}: {e}"
                if attempt == self.max_attempts or stalls >= self.stall_attempts:
                    raise ModelError(
                        f"{what}; gave up after {attempt} attempt(s)"
                        + (" (--connect-timeout, --read-timeout)" if stalled else "")
                    ) from e
                last_error = what
                delay = self._backoff(attempt)
                self._notice(
                    f"{what}; retrying (attempt {attempt + 1} of "
                    f"{self.stall_attempts if stalled else self.max_attempts})"
                )
            await trio.sleep(delay)
        raise ModelError(f"gave up: {last_error}")  # pragma: no cover - loop always returns or raises

    def _describe_failure(self, e: BaseException) -> str:
        connect = isinstance(e, httpx2.ConnectTimeout) or isinstance(e.__cause__, httpx2.ConnectTimeout)
        if connect:
            return f"{self._where()} did not accept a connection within {self.connect_timeout_s:g} s (connect timeout)"
        return f"{self._where()} sent nothing for {self.read_timeout_s:g} s (read timeout)"

    def _where(self) -> str:
        return f"the model endpoint ({self.base_url or 'api.anthropic.com'})"

    def _notice(self, text: str) -> None:
        if self.on_notice is not None:
            self.on_notice(text)

    def _backoff(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)) * (0.75 + random.random() / 2)

    async def _attempt(self, body: dict[str, Any], attempt: int) -> AsyncGenerator[StreamUpdate, None]:
        t0 = time.perf_counter()
        ttft = 0.0
        snap = Snapshot()
        events: list[dict[str, Any]] = []
        delivered = False
        try:
            stream = await self._client.messages.create(**body, stream=True)
            async with stream:
                it = stream.__aiter__()
                while True:
                    with trio.move_on_after(self.read_timeout_s) as scope:
                        try:
                            ev = await it.__anext__()
                        except StopAsyncIteration:
                            break
                    if scope.cancelled_caught:
                        raise StreamStalled(f"no stream event for {self.read_timeout_s:g} s")
                    raw = ev.to_dict() if hasattr(ev, "to_dict") else ev.model_dump()
                    if raw.get("type") == "error":
                        raise _StreamError(str(raw.get("error")))
                    events.append(raw)
                    snap = accumulate_event(raw, snap)
                    if raw.get("type") == "content_block_delta" and not ttft:
                        ttft = time.perf_counter() - t0
                    d = raw.get("delta", {})
                    if raw.get("type") == "content_block_delta" and d.get("type") == "text_delta":
                        yield TextDelta(raw["index"], d["text"])
                    if snap.completed_index is not None:
                        yield BlockDone(snap.completed_index, snap.blocks[snap.completed_index])
            if not snap.stopped:
                raise _StreamError("stream ended without message_stop")
            total = time.perf_counter() - t0
            message: Message = {"role": "assistant", "content": [_clean(b) for b in snap.blocks]}
            resp = ModelResponse(
                message=message,
                stop_reason=snap.stop_reason,
                usage=snap.usage,
                model=snap.model,
                ttft_s=ttft or total,
                total_s=total,
                attempts=attempt,
                raw_events=events,
            )
            if self.recorder is not None:
                self.recorder(
                    body,
                    {
                        "id": snap.id,
                        "type": "message",
                        "role": "assistant",
                        "model": snap.model,
                        "content": message["content"],
                        "stop_reason": snap.stop_reason,
                        "usage": snap.usage.as_dict(),
                    },
                    {"ttft_s": resp.ttft_s, "total_s": total},
                )
            delivered = True  # the caller has the usage from here on
            yield Done(resp)
        except (trio.Cancelled, GeneratorExit):
            # Cancelled by the caller mid-stream (a fork thrown away, a suggestion no longer wanted): the API
            # still bills the input message_start reported and the output streamed so far.
            if snap.started and not delivered:
                charge_cancelled(
                    snap.usage
                    if snap.stopped
                    else cancelled_usage(
                        snap.usage,
                        snap.blocks,
                        snap.partial_json,
                        model=snap.model or str(body.get("model", "")),
                    )
                )
            raise


class _StreamError(SpeculateError):
    pass


def _timed_out(e: BaseException) -> bool:
    """A connect or read timeout, or a stream that stopped sending (a stall, not a refusal)."""
    return isinstance(e, (StreamStalled, anthropic.APITimeoutError, httpx2.TimeoutException))


def _clean(block: dict[str, Any]) -> dict[str, Any]:
    # Drop SDK-added nulls (e.g. "citations": None) so that what we send back is what the API sent.
    return {k: v for k, v in block.items() if v is not None}


def _should_retry(e: anthropic.APIStatusError) -> bool:
    """Whether to try a failed request again: the server's ``x-should-retry`` first, as the SDK reads it."""
    said = e.response.headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return e.status_code in RETRYABLE_STATUS or e.status_code >= 500


def _retry_after(e: anthropic.APIStatusError) -> float | None:
    """The wait the server asked for, in seconds: ``retry-after-ms``, else ``retry-after`` (seconds or an
    HTTP date), read as the SDK reads them. None when absent, unreadable, or over :data:`MAX_RETRY_AFTER_S`
    (then the backoff applies: a REPL turn should not sit silent for minutes on one header)."""
    headers = e.response.headers
    v: float | None = None
    try:
        v = float(headers.get("retry-after-ms", "")) / 1000
    except (TypeError, ValueError):
        raw = headers.get("retry-after", "")
        try:
            v = float(raw)
        except (TypeError, ValueError):
            when = email.utils.parsedate_tz(raw) if raw else None
            v = float(email.utils.mktime_tz(when) - time.time()) if when is not None else None
    return v if v is not None and math.isfinite(v) and 0 <= v <= MAX_RETRY_AFTER_S else None


def _describe(e: anthropic.APIStatusError, attempt: int) -> str:
    try:
        err = e.body.get("error", {}) if isinstance(e.body, dict) else {}
        kind, msg = err.get("type", ""), err.get("message", str(e))
    except AttributeError:
        kind, msg = "", str(e)
    return f"HTTP {e.status_code} {kind} after {attempt} attempt(s): {msg}"
