"""The speculation policy's running estimates (:mod:`speculate.speculation.policy`): what a right fork saves
(a shrunk mean) and what a fork costs in dollars (requests, tokens written to the cache and output tokens per
request, each a shrunk mean, priced with the model's profile)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from speculate.models.base import Usage

# Stated priors (docs/speculation.md), each weighing one observation: a fork saves 3 s and makes 3 requests,
# each writing 300 tokens to the cache (a tool result, the previous answer) and 100 output tokens: the order
# of the bundled scenarios' forks (2.5 requests, 130 written and 50 output tokens per request, quick run).
PRIOR_SAVING_S = 3.0
PRIOR_REQUESTS = 3.0
PRIOR_WRITE_TOKENS = 300.0
PRIOR_OUTPUT_TOKENS = 100.0
PRIOR_WEIGHT = 1.0


@dataclass
class MeanEstimate:
    """A mean shrunk toward a prior: (weight · prior + Σx) / (weight + n)."""

    prior: float
    weight: float = PRIOR_WEIGHT
    n: int = 0
    total: float = 0.0

    @property
    def value(self) -> float:
        return (self.weight * self.prior + self.total) / (self.weight + self.n)

    def observe(self, x: float) -> None:
        if math.isfinite(x) and x >= 0:
            self.n += 1
            self.total += x


@dataclass
class ForkCost:
    """The dollars a fork would spend, from the model's prices and what this session's forks did."""

    requests: MeanEstimate = field(default_factory=lambda: MeanEstimate(PRIOR_REQUESTS))
    written: MeanEstimate = field(default_factory=lambda: MeanEstimate(PRIOR_WRITE_TOKENS))  # per request
    output: MeanEstimate = field(default_factory=lambda: MeanEstimate(PRIOR_OUTPUT_TOKENS))  # per request

    def estimate(self, model_name: str, context_tokens: int) -> float:
        """Request r reads the prefix plus what requests before it added (cache read, or full input below
        the model's cacheable minimum), writes its new part at the 5-minute write rate and pays its output."""
        from speculate.models.profiles import MTOK, find_profile

        profile = find_profile(model_name)
        if profile is None:  # no price known (a model the table lacks): cost nothing, as the records do
            return 0.0
        p = profile.prices
        r, w, o = self.requests.value, self.written.value, self.output.value
        rate = p.cache_read if context_tokens >= profile.min_cache_tokens else p.input
        prefix = r * context_tokens + (w + o) * r * (r - 1) / 2  # Σ over requests of the tokens read
        return (prefix * rate + r * (w * p.cache_write_5m + o * p.output)) / MTOK

    def observe(self, requests: int, usage: Usage) -> None:
        if requests <= 0:
            return
        self.requests.observe(requests)
        self.written.observe((usage.cache_creation_input_tokens + usage.input_tokens) / requests)
        self.output.observe(usage.output_tokens / requests)
