"""The HTTP face of the simulator: a threaded stdlib server on 127.0.0.1 speaking the Messages API.

Thin I/O around :class:`~speculate.sim.engine.Engine` and :func:`~speculate.sim.sse.events`: it parses
requests, draws injected faults, and paces the answer by the latency model times ``time_scale``.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from speculate import StrPath
from speculate.sim.engine import Engine, EngineStatistics, Planned
from speculate.sim.profiles import PROFILES, ModelProfile
from speculate.sim.replay import Replay
from speculate.sim.scenario import Scenario, default_scenario_paths, load_scenario
from speculate.sim.script import stable_id
from speculate.sim.sse import events
from speculate.sim.validate import RequestError

log = logging.getLogger(__name__)

FAULT_KINDS = ("overloaded", "rate_limit", "drop", "stall")


@dataclass(frozen=True, kw_only=True)
class FaultConfig:
    """Injected failures, each drawn per POST /v1/messages with its rate (0..1, summing to at most 1).

    ``overloaded``: HTTP 529 overloaded_error. ``rate_limit``: HTTP 429 rate_limit_error with a
    ``retry-after`` header. ``drop``: the connection closes without a response (mid-stream for streams).
    ``stall``: the response stops for ``stall_s`` and then the connection closes (mid-stream for streams).
    Durations are simulated seconds, multiplied by the server's ``time_scale``.
    """

    overloaded_rate: float = 0.0
    rate_limit_rate: float = 0.0
    drop_rate: float = 0.0
    stall_rate: float = 0.0
    retry_after_s: float = 1.0
    stall_s: float = 60.0

    def __post_init__(self) -> None:
        rates = (self.overloaded_rate, self.rate_limit_rate, self.drop_rate, self.stall_rate)
        if any(not 0.0 <= r <= 1.0 for r in rates) or sum(rates) > 1.0:
            raise ValueError(f"FaultConfig rates must each be in [0, 1] and sum to at most 1, got {rates}")
        if self.retry_after_s < 0 or self.stall_s < 0:
            raise ValueError("FaultConfig retry_after_s and stall_s must be >= 0")

    def draw(self, rng: random.Random) -> str | None:
        r = rng.random()
        for kind, rate in zip(
            FAULT_KINDS,
            (self.overloaded_rate, self.rate_limit_rate, self.drop_rate, self.stall_rate),
            strict=True,
        ):
            if r < rate:
                return kind
            r -= rate
        return None


@dataclass
class SimStatistics:
    engine: EngineStatistics
    cache_entries: int
    cache_hits: int
    cache_misses: int
    faults: dict[str, int] = field(default_factory=dict)


class _Aborted(Exception):
    """The server is stopping, or a fault ends this connection."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins handler threads: nothing outlives the SimServer
    block_on_close = True

    def __init__(self, address: tuple[str, int], sim: SimServer) -> None:
        self.sim = sim
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        self.stopping = threading.Event()
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up (timeouts, cancelled streams): routine for a server, not worth a traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            log.exception("simulator: error while serving %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    timeout = 120  # an idle keep-alive connection frees its thread after this
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall

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
        self.send_header("request-id", stable_id("req_", time.monotonic_ns(), id(self)))
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
        self._json(exc.status, exc.body(), extra)

    def _sleep_until(self, deadline: float) -> None:
        delay = deadline - time.monotonic()
        if delay > 0 and self.server.stopping.wait(delay):
            raise _Aborted("server stopping")

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
            return json.loads(raw or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RequestError(f"body: request body is not valid JSON: {exc}") from None

    # -- routes ---------------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        sim = self.server.sim
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            data = [_model_info(p) for p in sim.profiles]
            self._json(
                200, {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
            )
        elif path.startswith("/v1/models/"):
            name = path.removeprefix("/v1/models/")
            match = [p for p in sim.profiles if name == p.name or name in p.aliases]
            if match:
                self._json(200, _model_info(match[0]))
            else:
                self._error(RequestError(f"model: {name}", status=404, kind="not_found_error"))
        else:
            self._error(RequestError(f"Not found: GET {path}", status=404, kind="not_found_error"))

    def do_POST(self) -> None:
        sim = self.server.sim
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = self._read_json()
            if path == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": sim.engine.count_tokens(body)})
                return
            if path != "/v1/messages":
                raise RequestError(f"Not found: POST {path}", status=404, kind="not_found_error")
            arrived = time.monotonic()
            fault = sim._draw_fault()
            if fault == "overloaded":
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
            if isinstance(body, dict) and body.get("stream"):
                self._stream(planned, arrived, fault)
            else:
                self._respond(planned, arrived, fault)
        except RequestError as exc:
            self._error(exc)
        except _Aborted:
            self._drop()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _respond(self, planned: Planned, arrived: float, fault: str | None) -> None:
        sim = self.server.sim
        scale = sim.time_scale
        if fault == "drop":
            raise _Aborted("injected drop")
        if fault == "stall":
            self._sleep_until(arrived + sim.faults.stall_s * scale)
            raise _Aborted("injected stall")
        self._sleep_until(arrived + planned.ttft_s * scale)
        planned.started()
        self._sleep_until(arrived + planned.total_s * scale)
        self._json(200, planned.message)

    def _stream(self, planned: Planned, arrived: float, fault: str | None) -> None:
        sim = self.server.sim
        scale = sim.time_scale
        self._headers(200, "text/event-stream; charset=utf-8", {"cache-control": "no-cache"})
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        evs = events(planned.message)
        cut = max(3, len(evs) // 2)  # where an injected fault strikes: after message_start and some content
        decode_s = planned.total_s - planned.ttft_s
        for i, ev in enumerate(evs):
            if fault is not None and i == cut:
                if fault == "stall":
                    self._sleep_until(time.monotonic() + sim.faults.stall_s * scale)
                raise _Aborted(f"injected {fault}")
            self._sleep_until(arrived + (planned.ttft_s + ev.fraction * decode_s) * scale)
            if i == 0:
                planned.started()
            data = ev.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _model_info(p: ModelProfile) -> dict[str, Any]:
    return {"type": "model", "id": p.name, "display_name": p.display_name, "created_at": p.created_at}


ScenarioSource = StrPath | Scenario | Replay


class SimServer:
    """The simulator as a context manager: ``with SimServer(...) as sim: Anthropic(base_url=sim.base_url)``.

    ``scenarios``: scenario files (``.yaml``), recorded traces (``.jsonl``), or loaded objects; None means
    every ``bench/scenarios/*.yaml``. ``time_scale`` multiplies every simulated duration (latency, TTL,
    retry-after, stalls): 1.0 is real time, 0.01 runs a hundred times faster.
    """

    def __init__(
        self,
        scenarios: Iterable[ScenarioSource] | None = None,
        *,
        seed: int = 0,
        time_scale: float = 1.0,
        faults: FaultConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        profiles: Sequence[ModelProfile] = PROFILES,
    ) -> None:
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
        loaded: list[Scenario] = []
        replays: list[Replay] = []
        for src in default_scenario_paths() if scenarios is None else scenarios:
            if isinstance(src, Scenario):
                loaded.append(src)
            elif isinstance(src, Replay):
                replays.append(src)
            elif Path(src).suffix == ".jsonl":
                replays.append(Replay(src))
            else:
                loaded.append(load_scenario(src))
        self.scenarios = loaded
        self.time_scale = time_scale
        self.faults = faults or FaultConfig()
        self.profiles = tuple(profiles)
        self.host, self._port = host, port
        self._epoch = time.monotonic()
        self.engine = Engine(
            loaded, replays, seed=seed, profiles=self.profiles,
            clock=lambda: (time.monotonic() - self._epoch) / self.time_scale,
        )  # fmt: skip
        self._fault_rng = random.Random(seed)
        self._fault_counts = dict.fromkeys(FAULT_KINDS, 0)
        self._fault_lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _draw_fault(self) -> str | None:
        with self._fault_lock:
            kind = self.faults.draw(self._fault_rng)
            if kind is not None:
                self._fault_counts[kind] += 1
            return kind

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("SimServer is not running; use it as a context manager or call start()")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """For ``Anthropic(base_url=...)``: no ``/v1`` suffix, the SDK adds it."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> SimServer:
        if self._httpd is not None:
            raise RuntimeError("SimServer already started")
        self._httpd = _HTTPServer((self.host, self._port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="speculate-sim",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, cut open connections (stalled streams included) and join every thread."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.stopping.set()
        httpd.shutdown()
        with httpd.conn_lock:
            for conn in list(httpd.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def statistics(self) -> SimStatistics:
        cache = self.engine.cache.statistics()
        with self._fault_lock:
            faults = dict(self._fault_counts)
        return SimStatistics(self.engine.statistics(), cache.entries, cache.hits, cache.misses, faults)

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
