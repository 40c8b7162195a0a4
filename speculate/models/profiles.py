"""Model profiles: names, cache minimum, limits, API behaviour, latency and prices. The engine, the session
and the benchmark read prices from here (the cost of a response from its usage); the simulator serves them.

Every number here is documented with its public source in docs/simulator.md. Latency figures are
approximate public medians, not measurements of this machine; experiments compare loops on the same model.
A model id the table does not list, but that is a newer version of a known family (``claude-opus-6``,
``claude-haiku-5-5``), is served with the newest profile of that family: clients ship new default ids before
a simulator learns about them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

MTOK = 1_000_000
ALL_THINKING = frozenset({"enabled", "disabled", "adaptive"})
_ID_RE = re.compile(
    r"^claude-(?P<family>[a-z]+)-(?P<major>\d+)(?:-(?P<minor>\d{1,2}))?(?:-(?P<date>\d{8}))?$"
)


@dataclass(frozen=True, kw_only=True)
class Prices:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write_5m: float  # 1.25 x input
    cache_write_1h: float  # 2 x input
    cache_read: float  # 0.1 x input on most models (0.05 on Opus 5.5, 0.025 on Fable 5.1)


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
    max_output_tokens: int = 128_000
    context_window: int = 1_000_000
    # What the API accepts from this model (400 otherwise).
    thinking_modes: frozenset[str] = ALL_THINKING  # accepted thinking.type values
    thinking_default: bool = False  # thinking runs when the request omits `thinking`
    forced_tool_choice: bool = True  # tool_choice any / tool
    prefill: bool = False  # a conversation may end with an assistant message
    sampling: bool = True  # non-default temperature / top_p / top_k
    token_scale: float = 1.0  # the newer tokenizer (Opus 4.7+, Sonnet 5+, Fable) counts ~30% more tokens
    retires_at: str | None = None  # set for deprecated models
    prices: Prices = field(repr=False)

    @property
    def family(self) -> str:
        match = _ID_RE.match(self.name)
        return match.group("family") if match else self.name

    @property
    def version(self) -> tuple[int, int]:
        return _version(self.name) or (0, 0)

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


def _version(model: str) -> tuple[int, int] | None:
    match = _ID_RE.match(model)
    if match is None:
        return None
    return int(match.group("major")), int(match.group("minor") or 0)


def _prices(inp: float, out: float, *, read: float = 0.1) -> Prices:
    return Prices(
        input=inp, output=out, cache_write_5m=inp * 1.25, cache_write_1h=inp * 2, cache_read=inp * read
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
    max_output_tokens=64_000,
    context_window=200_000,
    thinking_modes=frozenset({"enabled", "disabled"}),  # 4.5 and earlier: extended thinking only
    prefill=True,
    retires_at="2026-11-30T00:00:00Z",
    prices=_prices(3.0, 15.0),
)
# Newer models on the Sonnet 4.5 latency figures (no separate public ones): 1M context, 128k output, no
# assistant prefill (Sonnet 4.6 and later).
_SONNET_4_6 = replace(
    _SONNET_4_5, name="claude-sonnet-4-6", display_name="Claude Sonnet 4.6 (simulated)",
    created_at="2026-02-17T00:00:00Z", aliases=(), max_output_tokens=128_000, context_window=1_000_000,
    thinking_modes=ALL_THINKING, prefill=False, retires_at=None,
)  # fmt: skip
_SONNET_5 = replace(
    _SONNET_4_6, name="claude-sonnet-5", display_name="Claude Sonnet 5 (simulated)",
    created_at="2026-06-01T00:00:00Z", thinking_modes=frozenset({"adaptive", "disabled"}),
    thinking_default=True, sampling=False, token_scale=1.3, prices=_prices(2.0, 10.0),
)  # fmt: skip
_OPUS_4_5 = ModelProfile(
    name="claude-opus-4-5",
    display_name="Claude Opus 4.5 (simulated)",
    created_at="2025-11-24T00:00:00Z",
    aliases=("claude-opus-4-5-20251101",),
    min_cache_tokens=4096,
    ttft_s=1.5,
    prefill_tok_s=7_000,
    cached_prefill_tok_s=60_000,
    decode_tok_s=55,
    max_output_tokens=64_000,
    context_window=200_000,
    thinking_modes=frozenset({"enabled", "disabled"}),
    prefill=True,
    retires_at="2027-01-22T00:00:00Z",
    prices=_prices(5.0, 25.0),
)
_OPUS_4_7 = replace(
    _OPUS_4_5, name="claude-opus-4-7", display_name="Claude Opus 4.7 (simulated)",
    created_at="2026-04-16T00:00:00Z", aliases=(), min_cache_tokens=2048, max_output_tokens=128_000,
    context_window=1_000_000, thinking_modes=frozenset({"adaptive", "disabled"}), prefill=False, sampling=False, token_scale=1.3,
    retires_at=None,
)  # fmt: skip
_OPUS_5 = replace(
    _OPUS_4_7, name="claude-opus-5", display_name="Claude Opus 5 (simulated)",
    created_at="2026-07-24T00:00:00Z", min_cache_tokens=512, thinking_default=True,
)  # fmt: skip

PROFILES: tuple[ModelProfile, ...] = (
    # The default of speculate's own agent (and its benchmark).
    _SONNET_4_6,
    _SONNET_4_5,
    _SONNET_5,
    replace(_SONNET_5, name="claude-sonnet-5-5", display_name="Claude Sonnet 5.5 (simulated)",
            created_at="2026-09-28T00:00:00Z", min_cache_tokens=512, forced_tool_choice=False),
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
        max_output_tokens=64_000,
        context_window=200_000,
        thinking_modes=frozenset({"enabled", "disabled"}),
        prefill=True,
        prices=_prices(1.0, 5.0),
    ),
    _OPUS_4_5,
    replace(_OPUS_4_5, name="claude-opus-4-6", display_name="Claude Opus 4.6 (simulated)",
            created_at="2026-02-05T00:00:00Z", aliases=(), max_output_tokens=128_000,
            context_window=1_000_000, thinking_modes=ALL_THINKING, prefill=False, retires_at=None),
    _OPUS_4_7,
    replace(_OPUS_4_7, name="claude-opus-4-8", display_name="Claude Opus 4.8 (simulated)",
            created_at="2026-06-01T00:00:00Z", min_cache_tokens=1024),
    _OPUS_5,
    # Claude Code 2.1.332's default model. Thinking always on, no forced tool use, cache reads at 0.05x.
    replace(_OPUS_5, name="claude-opus-5-5", display_name="Claude Opus 5.5 (simulated)",
            created_at="2026-09-22T00:00:00Z", thinking_modes=frozenset({"adaptive"}),
            forced_tool_choice=False, prices=_prices(4.0, 20.0, read=0.05)),
    # The slowest tier: Opus 4.1's former latency figures.
    replace(_OPUS_5, name="claude-fable-5-1", display_name="Claude Fable 5.1 (simulated)",
            created_at="2026-09-01T00:00:00Z", ttft_s=1.6, prefill_tok_s=5_000, cached_prefill_tok_s=50_000,
            decode_tok_s=40, thinking_modes=frozenset({"adaptive"}), forced_tool_choice=False,
            prices=_prices(10.0, 50.0, read=0.025)),
)  # fmt: skip

DEFAULT_MODEL = "claude-sonnet-4-6"


def find_profile(model: str, profiles: tuple[ModelProfile, ...] = PROFILES) -> ModelProfile | None:
    """The profile serving ``model``: its name, a dated alias, a dated form of its name, or a newer version
    of its family (served as the family's newest profile). Retired or unknown ids give None."""
    for profile in profiles:
        if model == profile.name or model in profile.aliases:
            return profile
    version = _version(model)
    if version is None:
        return None
    family = _ID_RE.match(model).group("family")  # type: ignore[union-attr]
    same = sorted((p for p in profiles if p.family == family), key=lambda p: p.version)
    exact = [p for p in same if p.version == version]
    if exact:
        return exact[0]  # a dated snapshot of a known version
    if same and version > same[-1].version:
        return same[-1]
    return None


def cost_usd(model: str, usage: Any) -> float:
    """What ``usage`` (a :class:`speculate.models.base.Usage`) cost on ``model``; 0 for an unknown model."""
    p = find_profile(model)
    return p.cost_usd(usage.as_dict()) if p else 0.0
