"""The HTTP routes of the simulator: a threaded stdlib server on 127.0.0.1 speaking the Messages API.

Thin I/O around :class:`~speculate.sim.engine.Engine` and :func:`~speculate.sim.sse.events`: it parses
requests, draws injected faults, charges the rate limiter, and paces the answer by the latency model times
``time_scale``. Every response carries a ``request-id`` header; error bodies repeat it as ``request_id``.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from speculate.errors import SpeculateError
from speculate.nesting import TooDeep, loads_json
from speculate.sim.engine import Engine, Planned
from speculate.sim.faults import FaultConfig
from speculate.sim.profiles import ModelProfile, find_profile
from speculate.sim.ratelimit import RateLimited, RateLimiter
from speculate.sim.realism import api_key
from speculate.sim.script import stable_id
from speculate.sim.sse import Event, events
from speculate.sim.validate import RequestError

log = logging.getLogger(__name__)
MAX_MODELS_PAGE = 1000


class Aborted(SpeculateError):
    """The server is stopping, or a fault ends this connection."""


class Served(Protocol):
    """What the routes need of the simulator that owns them (:class:`~speculate.sim.server.SimServer`): a
    protocol, so that the routes do not import the server that imports them."""

    engine: Engine
    limiter: RateLimiter
    faults: FaultConfig
    profiles: tuple[ModelProfile, ...]
    time_scale: float

    def draw_fault(self) -> str | None: ...
    def realise(self, planned: Planned, model: str, api_key: str) -> float: ...
    def served(self, body: dict[str, Any], planned: Planned, *, arrived: float, finished: float) -> None: ...
    def cancelled(self, planned: Planned, evs: list[Event], sent: int) -> None: ...


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins handler threads: nothing outlives the SimServer
    block_on_close = True
    # socketserver's default listen backlog is 5: a burst of clients (a bench at high concurrency, 200
    # connections at once) overflowed it and the kernel reset the rest. The kernel caps it at somaxconn.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], sim: Served) -> None:
        self.sim = sim
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        self.stopping = threading.Event()
        super().__init__(address, Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up (timeouts, cancelled streams): routine for a server, not worth a traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            log.exception("simulator: error while serving %s", client_address)


def model_info(p: ModelProfile, model_id: str | None = None) -> dict[str, Any]:
    """The Models API object for a profile (``model_id``: a newer id of its family served by it)."""
    return {
        "type": "model",
        "id": model_id or p.name,
        "display_name": p.display_name
        if model_id in (None, p.name)
        else f"{model_id} (simulated as {p.name})",
        "created_at": p.created_at,
        "lifecycle": "deprecated" if p.retires_at else "active",
        "retires_at": p.retires_at,
        "line": p.family,
        "max_input_tokens": p.context_window,
        "max_tokens": p.max_output_tokens,
    }


def models_page(profiles: tuple[ModelProfile, ...], query: str) -> dict[str, Any]:
    """``GET /v1/models``: newest first, paged by ``limit`` (1-1000, default 20), ``after_id``,
    ``before_id``."""
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    try:
        limit = int(params.get("limit", 20))
    except ValueError:
        raise RequestError(f"limit: Input should be a valid integer, got {params['limit']!r}") from None
    if not 1 <= limit <= MAX_MODELS_PAGE:
        raise RequestError(f"limit: Input should be between 1 and {MAX_MODELS_PAGE}")
    ordered = sorted(profiles, key=lambda p: p.created_at, reverse=True)
    ids = [p.name for p in ordered]
    start, stop = 0, len(ordered)
    for key in ("after_id", "before_id"):
        if key in params and params[key] not in ids:
            raise RequestError(f"{key}: no model {params[key]!r}")
    if "before_id" in params:
        stop = ids.index(params["before_id"])
        start = max(0, stop - limit)
    elif "after_id" in params:
        start = ids.index(params["after_id"]) + 1
    page = ordered[start : min(stop, start + limit)]
    data = [model_info(p) for p in page]
    has_more = start > 0 if "before_id" in params else start + len(page) < stop
    return {
        "data": data,
        "has_more": has_more,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HTTPServer
    timeout = 120  # an idle keep-alive connection frees its thread after this
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall
    request_id = ""
    _streaming: tuple[Planned, list[Event]] | None = (
        None  # the stream being sent, and how many events went out
    )
    _sent = 0

    def setup(self) -> None:
        super().setup()
        with self.server.conn_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.conn_lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the SDK's own logging is the place to look; stderr noise breaks REPL screens

    # -- plumbing -------------------------------------------------------------------------------------------
    def _headers(self, status: int, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("request-id", self.request_id)
        for k, v in (extra or {}).items():
            self.send_header(k, v)

    def _json(self, status: int, body: dict[str, Any], extra: dict[str, str] | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self._headers(status, "application/json", extra)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, exc: RequestError, extra: dict[str, str] | None = None) -> None:
        self._json(exc.status, {**exc.body(), "request_id": self.request_id}, extra)

    def _sleep_until(self, deadline: float) -> None:
        delay = deadline - time.monotonic()
        if delay > 0 and self.server.stopping.wait(delay):
            raise Aborted("server stopping")

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _read_json(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return loads_json(raw or b"null", what="body")
        except TooDeep as exc:  # parsing and validation recurse per level
            raise RequestError(str(exc)) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RequestError(f"body: request body is not valid JSON: {exc}") from None

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # -- routes ---------------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        sim = self.server.sim
        self.request_id = stable_id("req_", time.monotonic_ns(), id(self))
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        try:
            if path == "/v1/models":
                self._json(200, models_page(sim.profiles, url.query))
            elif path.startswith("/v1/models/"):
                name = path.removeprefix("/v1/models/")
                profile = find_profile(name, sim.profiles)
                if profile is None:
                    raise RequestError(f"model: {name}", status=404, kind="not_found_error")
                self._json(200, model_info(profile, name))
            else:
                raise RequestError(f"Not found: GET {path}", status=404, kind="not_found_error")
        except RequestError as exc:
            self._error(exc)

    def do_POST(self) -> None:
        sim = self.server.sim
        self.request_id = stable_id("req_", time.monotonic_ns(), id(self))
        self._streaming = None  # a keep-alive connection serves several requests
        path = urlsplit(self.path).path.rstrip("/")
        try:
            body = self._read_json()
            if path == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": sim.engine.count_tokens(body)})
                return
            if path != "/v1/messages":
                raise RequestError(f"Not found: POST {path}", status=404, kind="not_found_error")
            arrived = time.monotonic()
            fault = sim.draw_fault()
            if fault == "overloaded" or (fault == "stream_error" and not body.get("stream")):
                self._error(RequestError("Overloaded", status=529, kind="overloaded_error"))
                return
            if fault == "rate_limit":
                wait = sim.faults.retry_after_s * sim.time_scale
                self._error(
                    RequestError(
                        "Number of request tokens has exceeded your per-minute rate limit (simulated)",
                        status=429,
                        kind="rate_limit_error",
                    ),
                    {"retry-after": f"{wait:.3f}"},
                )
                return
            planned = sim.engine.plan(body)
            limits = self._charge(planned, body["model"])
            if limits is None:
                return
            arrived += sim.realise(planned, body["model"], api_key(self.headers))
            if body.get("stream"):
                self._stream(planned, arrived, fault, limits)
            else:
                self._respond(planned, arrived, fault, limits)
            sim.served(body, planned, arrived=arrived, finished=time.monotonic())
        except RequestError as exc:
            self._error(exc)
        except Aborted:
            self._drop()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            if self._streaming is not None:  # the client hung up mid-stream: what it is billed for
                sim.cancelled(self._streaming[0], self._streaming[1], self._sent)

    def _charge(self, planned: Planned, model: str) -> dict[str, str] | None:
        """Take the request from the rate limiter: its headers, or None once a 429 went out."""
        sim = self.server.sim
        usage = planned.message["usage"]
        now = sim.engine.clock()
        try:
            sim.limiter.charge(
                model,
                input_tokens=usage["input_tokens"] + usage["cache_creation_input_tokens"],
                output_tokens=usage["output_tokens"],
                now=now,
            )
        except RateLimited as exc:
            headers = sim.limiter.headers(model, now=now, time_scale=sim.time_scale)
            headers["retry-after"] = f"{max(exc.wait_s * sim.time_scale, 0.001):.3f}"
            self._error(RequestError(str(exc), status=429, kind="rate_limit_error"), headers)
            return None
        return sim.limiter.headers(model, now=now, time_scale=sim.time_scale)

    def _respond(self, planned: Planned, arrived: float, fault: str | None, limits: dict[str, str]) -> None:
        sim = self.server.sim
        scale = sim.time_scale
        if fault == "drop":
            raise Aborted("injected drop")
        if fault == "stall":
            self._sleep_until(arrived + sim.faults.stall_s * scale)
            raise Aborted("injected stall")
        self._sleep_until(arrived + planned.ttft_s * scale)
        planned.started()
        self._sleep_until(arrived + planned.total_s * scale)
        self._json(200, planned.message, limits)

    def _stream(self, planned: Planned, arrived: float, fault: str | None, limits: dict[str, str]) -> None:
        sim = self.server.sim
        scale = sim.time_scale
        self._headers(200, "text/event-stream; charset=utf-8", {"cache-control": "no-cache", **limits})
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        evs = events(planned.message)
        self._streaming, self._sent = (planned, evs), 0
        cut = max(3, len(evs) // 2)  # where an injected fault strikes: after message_start and some content
        decode_s = planned.total_s - planned.ttft_s
        for i, ev in enumerate(evs):
            if fault is not None and i == cut:
                if fault == "stream_error":
                    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                    self._chunk(Event("error", error, 1.0).encode())
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    raise Aborted("injected stream error")  # no message_stop; not recorded as served
                if fault == "stall":
                    self._sleep_until(time.monotonic() + sim.faults.stall_s * scale)
                raise Aborted(f"injected {fault}")
            self._sleep_until(arrived + (planned.ttft_s + ev.fraction * decode_s) * scale)
            if i == 0:
                planned.started()
            self._chunk(ev.encode())
            self._sent = i + 1
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
