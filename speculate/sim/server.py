"""The simulator as a running service: :class:`SimServer` starts the HTTP routes (:mod:`.handler`) on
127.0.0.1, owns the engine, the fault draws and the rate limiter, and optionally records every served
request as a replayable trace line (with when it arrived and finished, for client-overhead measurements).
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from speculate import StrPath
from speculate.sim.clients import ClientConventions
from speculate.sim.engine import Engine, EngineStatistics, Planned
from speculate.sim.faults import FAULT_KINDS, FaultConfig
from speculate.sim.handler import HTTPServer
from speculate.sim.profiles import PROFILES, ModelProfile, find_profile
from speculate.sim.ratelimit import RateLimiter, RateLimits
from speculate.sim.realism import KeyedLimiter, Realism
from speculate.sim.replay import Replay, TraceWriter
from speculate.sim.scenario import Scenario, default_scenario_paths
from speculate.sim.scenario_yaml import load_scenario
from speculate.sim.sse import Event, streamed_output_tokens

__all__ = ["FAULT_KINDS", "FaultConfig", "SimServer", "SimStatistics"]


@dataclass
class SimStatistics:
    engine: EngineStatistics
    cache_entries: int
    cache_hits: int
    cache_misses: int
    faults: dict[str, int] = field(default_factory=dict)
    # Streams the client cut: what they had sent (input as planned, output up to the cut) and its price.
    # ``engine.cost_usd`` prices every answer in full; a cut stream's bill is this one's share instead.
    cancelled: dict[str, Any] = field(default_factory=dict)
    # With realism: requests that waited for their key's rate limits, and the simulated seconds waited.
    queued: dict[str, Any] = field(default_factory=dict)


ScenarioSource = StrPath | Scenario | Replay


class SimServer:
    """The simulator as a context manager: ``with SimServer(...) as sim: Anthropic(base_url=sim.base_url)``.

    ``scenarios``: scenario files (``.yaml``), recorded traces (``.jsonl``), or loaded objects; None means
    every ``bench/scenarios/*.yaml``. ``time_scale`` multiplies every simulated duration (latency, TTL,
    retry-after, stalls): 1.0 is real time, 0.01 runs a hundred times faster. ``conventions``: how client
    requests are read (injected blocks, working directory, suggestion requests). ``record``: append every
    served request to this trace file.
    """

    def __init__(
        self,
        scenarios: Iterable[ScenarioSource] | None = None,
        *,
        seed: int = 0,
        hit_rate: float | None = None,
        time_scale: float = 1.0,
        faults: FaultConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        profiles: Sequence[ModelProfile] = PROFILES,
        rate_limits: RateLimits | None = None,
        conventions: ClientConventions | None = None,
        record: StrPath | None = None,
        realism: Realism | None = None,
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
            loaded, replays, seed=seed, hit_rate=hit_rate, profiles=self.profiles, conventions=conventions,
            clock=lambda: (time.monotonic() - self._epoch) / self.time_scale,
        )  # fmt: skip
        self.limiter = RateLimiter(rate_limits or RateLimits())
        self.realism = realism
        self._keyed = KeyedLimiter(realism) if realism is not None else None
        self._fault_rng = random.Random(seed)
        self._fault_counts = dict.fromkeys(FAULT_KINDS, 0)
        self._cancelled: dict[str, Any] = {}
        self._fault_lock = threading.Lock()
        self._record_path = Path(record) if record is not None else None
        self._recorder: TraceWriter | None = None
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def served(self, body: dict[str, Any], planned: Planned, *, arrived: float, finished: float) -> None:
        """A response went out in full: append it to the recorded trace, if any."""
        if self._recorder is not None:
            self._recorder.write(
                body, planned.message, ttft_s=planned.ttft_s, total_s=planned.total_s,
                served={"arrived_s": arrived - self._epoch, "finished_s": finished - self._epoch,
                        "source": planned.source},
            )  # fmt: skip

    def realise(self, planned: Planned, model: str, api_key: str) -> float:
        """With ``realism``: draw the response's TTFT with its heavy tail (``planned`` is changed) and return
        how long it queues for its key's rate limits, in wall seconds; 0 (and nothing changed) without."""
        if self._keyed is None or self.realism is None:
            return 0.0
        usage = planned.message["usage"]
        wait = self._keyed.admit(
            api_key,
            model,
            input_tokens=usage["input_tokens"] + usage["cache_creation_input_tokens"],
            output_tokens=usage["output_tokens"],
            now=self.engine.clock(),
        )
        profile = find_profile(model, self.profiles)
        factor = self.realism.ttft_factor(
            base_sigma=profile.jitter if profile else 0.0,
            seed=self.engine.seed,
            key=api_key,
            n=self._keyed.next_index(api_key),
        )
        decode = planned.total_s - planned.ttft_s
        planned.ttft_s *= factor
        planned.total_s = planned.ttft_s + decode
        return wait * self.time_scale

    def cancelled(self, planned: Planned, evs: list[Event], sent: int) -> None:
        """The client hung up after ``sent`` events of this stream: bill its input and the output streamed
        (nothing before ``message_start`` went out)."""
        usage = planned.message["usage"]
        streamed = streamed_output_tokens(evs, sent, usage["output_tokens"])
        if sent == 0:
            return
        profile = find_profile(planned.message["model"], self.profiles)
        billed = {
            k: usage.get(k, 0)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        }
        billed["output_tokens"] = streamed
        cost = profile.cost_usd(billed) if profile is not None else 0.0
        with self._fault_lock:
            c = self._cancelled
            c["streams"] = c.get("streams", 0) + 1
            for k, v in billed.items():
                c[k] = c.get(k, 0) + v
            c["output_tokens_not_streamed"] = (
                c.get("output_tokens_not_streamed", 0) + usage["output_tokens"] - streamed
            )
            c["cost_usd"] = c.get("cost_usd", 0.0) + cost
            c.setdefault("each", []).append({"source": planned.source, "events_sent": sent, **billed})

    def draw_fault(self) -> str | None:
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
        if self._record_path is not None:
            self._recorder = TraceWriter(self._record_path)
        self._httpd = HTTPServer((self.host, self._port), self)
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
        if self._recorder is not None:
            self._recorder.close()
            self._recorder = None

    def statistics(self) -> SimStatistics:
        cache = self.engine.cache.statistics()
        with self._fault_lock:
            faults = dict(self._fault_counts)
            cancelled = {k: (list(v) if isinstance(v, list) else v) for k, v in self._cancelled.items()}
        queued = {"requests": self._keyed.queued, "waited_s": self._keyed.waited_s} if self._keyed else {}
        return SimStatistics(
            self.engine.statistics(), cache.entries, cache.hits, cache.misses, faults, cancelled, queued
        )

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
