"""Injected failures: which kinds exist, their rates, and the seeded draw that picks one per request."""

from __future__ import annotations

import random
from dataclasses import dataclass

FAULT_KINDS = ("overloaded", "rate_limit", "drop", "stall", "stream_error")


@dataclass(frozen=True, kw_only=True)
class FaultConfig:
    """Injected failures, each drawn per POST /v1/messages with its rate (0..1, summing to at most 1).

    ``overloaded``: HTTP 529 overloaded_error. ``rate_limit``: HTTP 429 rate_limit_error with a
    ``retry-after`` header. ``drop``: the connection closes without a response (mid-stream for streams).
    ``stall``: the response stops for ``stall_s`` and then the connection closes (mid-stream for streams).
    ``stream_error``: a stream sends an ``error`` event (overloaded_error) after some content and ends
    without ``message_stop``, as the API does when it fails after the 200; a JSON response gets a 529.
    Durations are simulated seconds, multiplied by the server's ``time_scale``.
    """

    overloaded_rate: float = 0.0
    rate_limit_rate: float = 0.0
    drop_rate: float = 0.0
    stall_rate: float = 0.0
    stream_error_rate: float = 0.0
    retry_after_s: float = 1.0
    stall_s: float = 60.0

    @property
    def rates(self) -> tuple[float, ...]:
        return (
            self.overloaded_rate,
            self.rate_limit_rate,
            self.drop_rate,
            self.stall_rate,
            self.stream_error_rate,
        )

    def __post_init__(self) -> None:
        if any(not 0.0 <= r <= 1.0 for r in self.rates) or sum(self.rates) > 1.0:
            raise ValueError(
                f"FaultConfig rates must each be in [0, 1] and sum to at most 1, got {self.rates}"
            )
        if self.retry_after_s < 0 or self.stall_s < 0:
            raise ValueError("FaultConfig retry_after_s and stall_s must be >= 0")

    @classmethod
    def spread(cls, total: float) -> FaultConfig:
        """``total`` split evenly over every kind (``speculate sim serve --fault-rate``)."""
        share = total / len(FAULT_KINDS)
        return cls(**{f"{kind}_rate": share for kind in FAULT_KINDS})

    def draw(self, rng: random.Random) -> str | None:
        r = rng.random()
        for kind, rate in zip(FAULT_KINDS, self.rates, strict=True):
            if r < rate:
                return kind
            r -= rate
        return None
