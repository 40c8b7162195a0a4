"""The simulator's core, free of HTTP: a request body in, a scripted Message with usage and timings out.

Order of answers: a recorded trace entry for the exact request, else the scenario script, else the marked
fallback. Usage comes from the prompt cache; timings from the latency model (or the trace).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from speculate.sim.cache import CacheControlError, PromptCache, Unit, units_of
from speculate.sim.clients import DEFAULT_CONVENTIONS, ClientConventions
from speculate.sim.latency import timing
from speculate.sim.profiles import PROFILES, ModelProfile
from speculate.sim.replay import Replay, canonical_key
from speculate.sim.scenario import Scenario, check_unique
from speculate.sim.script import Reply, Script, stable_id
from speculate.sim.shaping import shape
from speculate.sim.tokens import output_tokens
from speculate.sim.validate import RequestError, validate


@dataclass
class Planned:
    """Everything the server needs to send one response."""

    message: dict[str, Any]  # the final Message, usage included
    ttft_s: float  # simulated seconds from arrival to first token
    total_s: float  # simulated seconds from arrival to the last token
    source: str
    _commit: Callable[[], None] = field(repr=False)

    def started(self) -> None:
        """Call when the response starts: its cache writes become visible to other requests."""
        self._commit()


@dataclass
class EngineStatistics:
    requests: int = 0
    scripted: int = 0
    replayed: int = 0
    fallbacks: int = 0
    cost_usd: float = 0.0
    by_source: dict[str, int] = field(default_factory=dict)


def _scaled(units: list[Unit], scale: float) -> list[Unit]:
    """Token counts under a model's tokenizer (the newer one counts ~30% more for the same text)."""
    if scale == 1.0:
        return units
    return [replace(u, tokens=max(1, math.ceil(u.tokens * scale))) for u in units]


def jitter_key(reply: Reply, content_key: str) -> str:
    """What latency jitter is drawn for: a scripted reply's position (scenario, turn, request index within
    the turn, or the suggestion), so the paired arms of one seed (rep) draw the same jitter for the same
    request even when their tool outputs differ; anything else by its content."""
    if reply.is_fallback or reply.source.startswith("trace"):
        return content_key
    return "scripted:" + reply.source


class Engine:
    """Thread-safe: the HTTP server calls :meth:`plan` from one thread per connection."""

    def __init__(
        self,
        scenarios: Iterable[Scenario] = (),
        replays: Iterable[Replay] = (),
        *,
        seed: int = 0,
        hit_rate: float | None = None,
        profiles: tuple[ModelProfile, ...] = PROFILES,
        conventions: ClientConventions | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        scenarios = list(scenarios)
        check_unique(scenarios)
        self.script = Script(
            scenarios, seed=seed, hit_rate=hit_rate, conventions=conventions or DEFAULT_CONVENTIONS
        )
        self.replays = list(replays)
        self.seed = seed
        self.profiles = profiles
        self.clock = clock  # simulated seconds
        self.cache = PromptCache()
        self._stats = EngineStatistics()
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()

    def _reply(self, body: dict[str, Any]) -> Reply:
        for replay in self.replays:
            reply = replay.reply(body)
            if reply is not None:
                return reply
        return self.script.reply(body)

    def _units(self, body: dict[str, Any], profile: ModelProfile) -> list[Unit]:
        try:
            units = _scaled(units_of(body), profile.token_scale)
        except CacheControlError as exc:
            raise RequestError(str(exc)) from None
        total = sum(u.tokens for u in units)
        if total > profile.context_window:
            raise RequestError(f"prompt is too long: {total} tokens > {profile.context_window} maximum")
        return units

    def count_tokens(self, body: Any) -> int:
        profile = validate(body, self.profiles, count_only=True)
        return sum(u.tokens for u in self._units(body, profile))

    def plan(self, body: Any) -> Planned:
        profile = validate(body, self.profiles)
        units = self._units(body, profile)
        arrived = self.clock()
        cache_plan = self.cache.plan(units, now=arrived, min_tokens=profile.min_cache_tokens)
        has_breakpoint = any(u.ttl for u in units)
        key = canonical_key(body)
        reply = shape(self._reply(body), body, profile)
        out_tokens = max(1, math.ceil(output_tokens(reply.content) * profile.token_scale))
        if reply.timings is not None:
            ttft, total = reply.timings["ttft_s"], max(reply.timings["total_s"], reply.timings["ttft_s"])
        else:
            t = timing(
                profile,
                uncached_tokens=cache_plan.input_tokens + cache_plan.creation_tokens,
                cached_tokens=cache_plan.read_tokens,
                seed=self.seed,
                key=jitter_key(reply, key),
            )
            ttft, total = t.ttft_s, t.total_s(out_tokens)
        usage = {**cache_plan.usage(), "output_tokens": out_tokens, "service_tier": "standard"}
        with self._lock:
            # Every response has its own id (the API's are unique); repeatable in request order.
            n = self._served[key] = self._served.get(key, 0) + 1
        message = {
            "id": stable_id("msg_", self.seed, key, n),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": reply.content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": reply.stop_sequence,
            "usage": usage,
        }
        with self._lock:
            s = self._stats
            s.requests += 1
            s.replayed += reply.source.startswith("trace")
            s.fallbacks += reply.is_fallback
            s.scripted += not reply.is_fallback and not reply.source.startswith("trace")
            s.cost_usd += profile.cost_usd(usage)
            label = reply.source.split(" (")[0] if not reply.is_fallback else "fallback"
            s.by_source[label] = s.by_source.get(label, 0) + 1

        def commit() -> None:
            self.cache.commit(cache_plan, now=self.clock(), had_breakpoint=has_breakpoint, requested=arrived)

        return Planned(message=message, ttft_s=ttft, total_s=total, source=reply.source, _commit=commit)

    def statistics(self) -> EngineStatistics:
        with self._lock:
            s = self._stats
            return EngineStatistics(
                s.requests, s.scripted, s.replayed, s.fallbacks, s.cost_usd, dict(s.by_source)
            )
