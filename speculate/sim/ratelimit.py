"""Organisation rate limits as the API describes them: token buckets per minute, reported in headers.

Three buckets, each refilled continuously up to its per-minute limit: requests (RPM), input tokens (ITPM:
uncached input plus cache writes; cache reads do not count on current models) and output tokens (OTPM).
Every response carries the ``anthropic-ratelimit-*`` headers (limit, remaining, reset as an RFC 3339 time
when the bucket is full again). With ``enforce`` a request that does not fit gets 429 ``rate_limit_error``
with ``retry-after``. Output is charged by the tokens the answer has (the API charges ``max_tokens`` up
front and refunds the difference at the end). Limits apply per model, as the API's do.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from speculate.errors import SpeculateError

BUCKETS = ("requests", "input-tokens", "output-tokens")


@dataclass(frozen=True, kw_only=True)
class RateLimits:
    """Per-minute limits (illustrative defaults, not any organisation's) and whether they are enforced."""

    requests_per_minute: int = 4_000
    input_tokens_per_minute: int = 2_000_000
    output_tokens_per_minute: int = 400_000
    enforce: bool = False

    def __post_init__(self) -> None:
        if min(self.requests_per_minute, self.input_tokens_per_minute, self.output_tokens_per_minute) < 1:
            raise ValueError("RateLimits: every per-minute limit must be >= 1")


class RateLimited(SpeculateError):
    """The request does not fit: which bucket, and how long (simulated seconds) until it would."""

    def __init__(self, bucket: str, limit: int, wait_s: float, cost: int) -> None:
        unit = "requests" if bucket == "requests" else bucket.replace("-", " ")
        if cost > limit:
            text = (
                f"This request ({cost:,} {unit}) is larger than your organization's rate limit of {limit:,}"
            )
        else:
            text = f"This request would exceed your organization's rate limit of {limit:,}"
        super().__init__(
            f"{text} {unit} per minute (simulated). Wait and retry, or lower the request's size."
        )
        self.bucket = bucket
        self.wait_s = wait_s


@dataclass
class _Bucket:
    limit: int
    level: float
    at: float  # simulated seconds of the last update

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.at) * self.limit / 60.0)
        self.at = now

    def full_in(self) -> float:
        return (self.limit - self.level) * 60.0 / self.limit


@dataclass
class RateLimiter:
    """The buckets of every model the server has seen; thread-safe."""

    limits: RateLimits = field(default_factory=RateLimits)
    _buckets: dict[tuple[str, str], _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _get(self, model: str, name: str, now: float) -> _Bucket:
        limit = {
            "requests": self.limits.requests_per_minute,
            "input-tokens": self.limits.input_tokens_per_minute,
            "output-tokens": self.limits.output_tokens_per_minute,
        }[name]
        bucket = self._buckets.setdefault((model, name), _Bucket(limit, float(limit), now))
        bucket.refill(now)
        return bucket

    def charge(self, model: str, *, input_tokens: int, output_tokens: int, now: float) -> None:
        """Take one request and its tokens; raises :class:`RateLimited` (taking nothing) when enforced and
        a bucket cannot cover it."""
        cost = {"requests": 1, "input-tokens": input_tokens, "output-tokens": output_tokens}
        with self._lock:
            buckets = {name: self._get(model, name, now) for name in BUCKETS}
            if self.limits.enforce:
                for name, bucket in buckets.items():
                    if cost[name] > bucket.level:
                        need = min(cost[name], bucket.limit) - bucket.level
                        raise RateLimited(name, bucket.limit, need * 60.0 / bucket.limit, cost[name])
            for name, bucket in buckets.items():
                bucket.level -= cost[name]

    def headers(
        self, model: str, *, now: float, time_scale: float, wall: datetime | None = None
    ) -> dict[str, str]:
        """The ``anthropic-ratelimit-*`` headers; reset times are wall-clock (simulated seconds scaled)."""
        wall = wall or datetime.now(UTC)
        out: dict[str, str] = {}
        with self._lock:
            buckets = {name: self._get(model, name, now) for name in BUCKETS}
        for name, bucket in buckets.items():
            out[f"anthropic-ratelimit-{name}-limit"] = str(bucket.limit)
            out[f"anthropic-ratelimit-{name}-remaining"] = str(max(0, math.floor(bucket.level)))
            reset = wall + timedelta(seconds=bucket.full_in() * time_scale)
            out[f"anthropic-ratelimit-{name}-reset"] = reset.isoformat(timespec="seconds").replace(
                "+00:00", "Z"
            )
        # tokens-*: the token bucket closer to its limit, the one most likely to stop the next request.
        tight = min(("input-tokens", "output-tokens"), key=lambda n: buckets[n].level / buckets[n].limit)
        for part in ("limit", "remaining", "reset"):
            out[f"anthropic-ratelimit-tokens-{part}"] = out[f"anthropic-ratelimit-{tight}-{part}"]
        return out
