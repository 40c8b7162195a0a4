"""The latency model: when the first token and each later token of a response appear.

TTFT = fixed overhead + uncached input / prefill rate + cache-read input / cached prefill rate; decoding then
runs at the profile's tokens/s. Both get a seeded log-normal jitter, so one request always gets the same
timings for one seed. All values are simulated seconds; the server multiplies by ``time_scale``.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from speculate.sim.profiles import ModelProfile


@dataclass(frozen=True)
class Timing:
    ttft_s: float  # request arrival -> first token
    decode_tok_s: float  # output rate after the first token

    def total_s(self, output_tokens: int) -> float:
        return self.ttft_s + output_tokens / self.decode_tok_s


def rng_for(*parts: object) -> random.Random:
    """A private RNG for one key, e.g. (seed, request): the same key gets the same draws, in any process.
    The simulator's suggestion draws and the bench's simulated user use it too."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def timing(profile: ModelProfile, *, uncached_tokens: int, cached_tokens: int, seed: int, key: str) -> Timing:
    """Timings for one response; ``uncached_tokens`` includes cache writes (they are prefilled too)."""
    rng = rng_for(seed, key)
    # Log-normal with median 1: jitter never makes a time negative and is symmetric in ratio.
    ttft_factor = math.exp(rng.gauss(0.0, profile.jitter))
    decode_factor = math.exp(rng.gauss(0.0, profile.jitter))
    ttft = (
        profile.ttft_s
        + uncached_tokens / profile.prefill_tok_s
        + cached_tokens / profile.cached_prefill_tok_s
    ) * ttft_factor
    return Timing(ttft_s=ttft, decode_tok_s=profile.decode_tok_s * decode_factor)
