"""The simulator's core, free of HTTP: a request body in, a scripted Message with usage and timings out.

Order of answers: a recorded trace entry for the exact request, else the scenario script, else the marked
fallback. Usage comes from the prompt cache; timings from the latency model (or the trace).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from speculate.sim.cache import CacheControlError, CachePlan, PromptCache, units_of
from speculate.sim.latency import timing
from speculate.sim.profiles import PROFILES, ModelProfile
from speculate.sim.replay import Replay, canonical_key
from speculate.sim.scenario import Scenario, check_unique
from speculate.sim.script import Reply, Script, stable_id
from speculate.sim.tokens import CHARS_PER_TOKEN, output_tokens
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


def _truncate(reply: Reply, max_tokens: int) -> Reply:
    """What a model cut off at ``max_tokens`` returns: the text so far, no tool calls."""
    if output_tokens(reply.content) <= max_tokens:
        return reply
    budget = int(max_tokens * CHARS_PER_TOKEN)
    content: list[dict[str, Any]] = []
    for block in reply.content:
        if block.get("type") != "text" or budget <= 0:
            break
        content.append({"type": "text", "text": block["text"][:budget]})
        budget -= len(block["text"])
    return Reply(content, "max_tokens", reply.source + " (truncated)", reply.timings)


class Engine:
    """Thread-safe: the HTTP server calls :meth:`plan` from one thread per connection."""

    def __init__(
        self,
        scenarios: Iterable[Scenario] = (),
        replays: Iterable[Replay] = (),
        *,
        seed: int = 0,
        profiles: tuple[ModelProfile, ...] = PROFILES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        scenarios = list(scenarios)
        check_unique(scenarios)
        self.script = Script(scenarios, seed=seed)
        self.replays = list(replays)
        self.seed = seed
        self.profiles = profiles
        self.clock = clock  # simulated seconds
        self.cache = PromptCache()
        self._stats = EngineStatistics()
        self._lock = threading.Lock()

    def _reply(self, body: dict[str, Any]) -> Reply:
        for replay in self.replays:
            reply = replay.reply(body)
            if reply is not None:
                return reply
        return self.script.reply(body)

    def _cache_plan(self, body: dict[str, Any], profile: ModelProfile) -> tuple[CachePlan, bool]:
        try:
            units = units_of(body)
        except CacheControlError as exc:
            raise RequestError(str(exc)) from None
        plan = self.cache.plan(units, now=self.clock(), min_tokens=profile.min_cache_tokens)
        return plan, any(u.ttl for u in units)

    def count_tokens(self, body: Any) -> int:
        validate(body, self.profiles, count_only=True)
        return sum(u.tokens for u in units_of(body))

    def plan(self, body: Any) -> Planned:
        profile = validate(body, self.profiles)
        cache_plan, has_breakpoint = self._cache_plan(body, profile)
        key = canonical_key(body)
        reply = _truncate(self._reply(body), body["max_tokens"])
        out_tokens = output_tokens(reply.content)
        if reply.timings is not None:
            ttft, total = reply.timings["ttft_s"], max(reply.timings["total_s"], reply.timings["ttft_s"])
        else:
            t = timing(
                profile,
                uncached_tokens=cache_plan.input_tokens + cache_plan.creation_tokens,
                cached_tokens=cache_plan.read_tokens,
                seed=self.seed,
                key=key,
            )
            ttft, total = t.ttft_s, t.total_s(out_tokens)
        usage = {**cache_plan.usage(), "output_tokens": out_tokens, "service_tier": "standard"}
        message = {
            "id": stable_id("msg_", self.seed, key),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": reply.content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
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
            self.cache.commit(cache_plan, now=self.clock(), had_breakpoint=has_breakpoint)

        return Planned(message=message, ttft_s=ttft, total_s=total, source=reply.source, _commit=commit)

    def statistics(self) -> EngineStatistics:
        with self._lock:
            s = self._stats
            return EngineStatistics(
                s.requests, s.scripted, s.replayed, s.fallbacks, s.cost_usd, dict(s.by_source)
            )
