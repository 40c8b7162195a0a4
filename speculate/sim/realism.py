"""A less ideal API, as an option (``SimServer(realism=Realism())``, ``speculate sim serve --realistic``,
``speculate bench --sim realistic``): what the default simulator leaves out and a real deployment has.

- **Per-key rate limits, enforced by queueing.** Each API key (``x-api-key``) has its own per-minute token
  buckets per model (requests, input tokens, output tokens; cache reads do not count), at the published
  Tier 1 limits for the Sonnet 4.x class by default. A request that does not fit waits until it does, in
  arrival order (a bucket may go into debt: the next request waits for it to be paid back). The API answers
  such a request with 429 and ``retry-after``; this is a client that waits exactly that long, without the
  extra round trip.
- **Heavy-tailed TTFT.** Each response's time to first token is multiplied by a log-normal factor (so the
  total σ, with the profile's own jitter, is ``ttft_sigma``) and, for a ``tail_share`` of responses, by a
  second log-normal factor of median ``tail_median`` (a stall: queueing, a cold replica). The defaults fit
  two published probes of Claude TTFT (docs/simulator.md).
- **Unpaired draws.** The default simulator draws jitter by a request's scripted position, so the paired
  arms of a rep see identical latencies; here the draws are keyed by the API key and the key's request
  count, so arms (each with its own key) do not share their luck.

All times are simulated seconds; the server multiplies them by ``time_scale``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import Message

from speculate.sim.latency import rng_for

# The rate limits page (platform.claude.com/docs/en/api/rate-limits), Tier 1, Claude Sonnet 4.x.
TIER1_SONNET = (50, 30_000, 8_000)  # requests, input tokens, output tokens per minute


def api_key(headers: Mapping[str, str] | Message) -> str:
    """The request's API key: ``x-api-key``, or the token of ``Authorization: Bearer`` (which SDKs send
    too); "" if neither."""
    key = headers.get("x-api-key")
    if key:
        return key
    auth = headers.get("authorization") or ""
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


@dataclass(frozen=True, kw_only=True)
class Realism:
    """The knobs (defaults: docs/simulator.md, "A less ideal API")."""

    ttft_sigma: float = 0.5  # total log-normal σ of TTFT, the profile's own jitter included
    tail_share: float = 0.05  # share of responses with an extra stall
    tail_median: float = 4.0  # the stall's factor on TTFT (median; log-normal with tail_sigma)
    tail_sigma: float = 0.5
    requests_per_minute: int = TIER1_SONNET[0]
    input_tokens_per_minute: int = TIER1_SONNET[1]
    output_tokens_per_minute: int = TIER1_SONNET[2]

    def __post_init__(self) -> None:
        if (
            self.ttft_sigma < 0
            or self.tail_sigma < 0
            or self.tail_median < 1
            or not 0 <= self.tail_share <= 1
        ):
            raise ValueError("Realism: sigmas must be >= 0, tail_median >= 1 and tail_share within 0..1")
        if min(self.requests_per_minute, self.input_tokens_per_minute, self.output_tokens_per_minute) < 1:
            raise ValueError("Realism: every per-minute limit must be >= 1")

    def ttft_factor(self, *, base_sigma: float, seed: int, key: str, n: int) -> float:
        """The factor on the ``n``-th response to ``key``: log-normal (σ on top of the profile's own, so the
        total is ``ttft_sigma``) times, for a ``tail_share`` of them, the stall."""
        rng = rng_for("realism", seed, key, n)
        extra = math.sqrt(max(0.0, self.ttft_sigma**2 - base_sigma**2))
        factor = math.exp(rng.gauss(0.0, extra))
        if rng.random() < self.tail_share:
            factor *= self.tail_median * math.exp(rng.gauss(0.0, self.tail_sigma))
        return factor


@dataclass
class _Debt:
    """A token bucket that may go below zero: what is owed is waited for, in order."""

    rate: float  # per simulated second
    cap: float
    level: float
    at: float

    def take(self, cost: float, now: float) -> float:
        """Take ``cost`` now; how long (simulated s) the request must wait for the bucket to cover it."""
        self.level = min(self.cap, self.level + (now - self.at) * self.rate)
        self.at = now
        wait = max(0.0, (cost - self.level) / self.rate)
        self.level -= cost
        return wait


@dataclass
class KeyedLimiter:
    """Per (API key, model) buckets; thread-safe. ``admit`` returns the queueing delay of a request."""

    realism: Realism
    _buckets: dict[tuple[str, str], tuple[_Debt, ...]] = field(default_factory=dict)
    _count: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    queued: int = 0  # requests that had to wait
    waited_s: float = 0.0  # simulated seconds waited in all

    def admit(self, key: str, model: str, *, input_tokens: int, output_tokens: int, now: float) -> float:
        r = self.realism
        with self._lock:
            buckets = self._buckets.get((key, model))
            if buckets is None:
                limits = (r.requests_per_minute, r.input_tokens_per_minute, r.output_tokens_per_minute)
                buckets = self._buckets[key, model] = tuple(
                    _Debt(x / 60.0, float(x), float(x), now) for x in limits
                )
            wait = max(b.take(c, now) for b, c in zip(buckets, (1, input_tokens, output_tokens), strict=True))
            if wait > 0:
                self.queued += 1
                self.waited_s += wait
            return wait

    def next_index(self, key: str) -> int:
        """The key's request count so far (its draws' index)."""
        with self._lock:
            n = self._count[key] = self._count.get(key, 0) + 1
            return n
