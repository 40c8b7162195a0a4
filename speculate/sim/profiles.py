"""Model profiles the simulator serves: names, cache minimum, latency parameters and prices.

Every number here is documented with its public source in docs/simulator.md. Latency figures are
approximate public medians, not measurements of this machine; experiments compare loops on the same model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

MTOK = 1_000_000


@dataclass(frozen=True, kw_only=True)
class Prices:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write_5m: float  # 1.25 x input
    cache_write_1h: float  # 2 x input
    cache_read: float  # 0.1 x input


@dataclass(frozen=True, kw_only=True)
class ModelProfile:
    name: str
    display_name: str
    created_at: str
    aliases: tuple[str, ...] = ()
    min_cache_tokens: int  # below this a breakpoint silently caches nothing
    ttft_s: float  # fixed time to first token, excluding prefill of the prompt
    prefill_tok_s: float  # uncached input tokens processed per second
    cached_prefill_tok_s: float  # cache-read tokens per second (much faster)
    decode_tok_s: float  # output tokens per second once streaming
    jitter: float = 0.15  # sigma of the log-normal factor applied to ttft and decode rate
    max_output_tokens: int = 64_000
    context_window: int = 200_000
    prices: Prices = field(repr=False)

    def cost_usd(self, usage: dict[str, Any]) -> float:
        """The price of one response from its ``usage`` dict (the API's field names)."""
        creation = usage.get("cache_creation") or {}
        write_1h = int(creation.get("ephemeral_1h_input_tokens") or 0)
        write_total = int(usage.get("cache_creation_input_tokens") or 0)
        write_5m = write_total - write_1h
        p = self.prices
        return (
            int(usage.get("input_tokens") or 0) * p.input
            + int(usage.get("output_tokens") or 0) * p.output
            + write_5m * p.cache_write_5m
            + write_1h * p.cache_write_1h
            + int(usage.get("cache_read_input_tokens") or 0) * p.cache_read
        ) / MTOK


def _prices(inp: float, out: float) -> Prices:
    return Prices(
        input=inp, output=out, cache_write_5m=inp * 1.25, cache_write_1h=inp * 2, cache_read=inp * 0.1
    )


_SONNET_4_5 = ModelProfile(
    name="claude-sonnet-4-5",
    display_name="Claude Sonnet 4.5 (simulated)",
    created_at="2025-09-29T00:00:00Z",
    aliases=("claude-sonnet-4-5-20250929",),
    min_cache_tokens=1024,
    ttft_s=1.2,
    prefill_tok_s=10_000,
    cached_prefill_tok_s=70_000,
    decode_tok_s=65,
    prices=_prices(3.0, 15.0),
)

PROFILES: tuple[ModelProfile, ...] = (
    # The default: the SDK warns that claude-sonnet-4-5 is deprecated (end of life 2026-11-30), and tests
    # turn warnings into errors. Same latency parameters and prices as Sonnet 4.5 (no separate public
    # figures).
    replace(_SONNET_4_5, name="claude-sonnet-4-6", display_name="Claude Sonnet 4.6 (simulated)",
            created_at="2026-02-17T00:00:00Z", aliases=()),
    _SONNET_4_5,
    ModelProfile(
        name="claude-haiku-4-5",
        display_name="Claude Haiku 4.5 (simulated)",
        created_at="2025-10-01T00:00:00Z",
        aliases=("claude-haiku-4-5-20251001",),
        min_cache_tokens=4096,
        ttft_s=0.5,
        prefill_tok_s=20_000,
        cached_prefill_tok_s=140_000,
        decode_tok_s=110,
        prices=_prices(1.0, 5.0),
    ),
    ModelProfile(
        name="claude-opus-4-1",
        display_name="Claude Opus 4.1 (simulated)",
        created_at="2025-08-05T00:00:00Z",
        aliases=("claude-opus-4-1-20250805",),
        min_cache_tokens=1024,
        ttft_s=1.6,
        prefill_tok_s=5_000,
        cached_prefill_tok_s=50_000,
        decode_tok_s=40,
        max_output_tokens=32_000,
        prices=_prices(15.0, 75.0),
    ),
    ModelProfile(
        name="claude-opus-4-5",
        display_name="Claude Opus 4.5 (simulated)",
        created_at="2025-11-24T00:00:00Z",
        aliases=("claude-opus-4-5-20251101",),
        min_cache_tokens=4096,
        ttft_s=1.5,
        prefill_tok_s=7_000,
        cached_prefill_tok_s=60_000,
        decode_tok_s=55,
        prices=_prices(5.0, 25.0),
    ),
)

DEFAULT_MODEL = "claude-sonnet-4-6"


def find_profile(model: str, profiles: tuple[ModelProfile, ...] = PROFILES) -> ModelProfile | None:
    """The profile serving ``model`` (its name or a dated alias), or None."""
    for profile in profiles:
        if model == profile.name or model in profile.aliases:
            return profile
    return None
