"""The less ideal API (speculate/sim/realism.py): per-key rate limits enforced by queueing, heavy-tailed
TTFT from published measurements, and draws not shared between API keys."""

from __future__ import annotations

import time

import anthropic
import pytest

from bench.stats import percentile
from speculate.sim.realism import KeyedLimiter, Realism
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer

SCENARIO = """
name: realism
turns:
  - prompt: "say hi"
    steps:
      - text: "hi"
"""


def test_requests_over_a_keys_limit_queue_in_order_and_other_keys_do_not_wait() -> None:
    lim = KeyedLimiter(Realism(requests_per_minute=2))
    waits = [lim.admit("a", "m", input_tokens=10, output_tokens=5, now=0.0) for _ in range(4)]
    assert waits == [0.0, 0.0, pytest.approx(30.0), pytest.approx(60.0)]  # 2 per minute: one every 30 s
    assert lim.admit("b", "m", input_tokens=10, output_tokens=5, now=0.0) == 0.0  # its own buckets
    assert lim.admit("a", "other-model", input_tokens=10, output_tokens=5, now=0.0) == 0.0  # per model too
    # Later, the debt is paid back at the refill rate: at t=90 s the fourth request's slot has passed.
    assert lim.admit("a", "m", input_tokens=10, output_tokens=5, now=90.0) == pytest.approx(0.0)
    assert lim.queued == 2 and lim.waited_s == pytest.approx(90.0)


def test_input_tokens_beyond_the_minute_wait_for_the_refill() -> None:
    lim = KeyedLimiter(Realism(input_tokens_per_minute=30_000))
    assert lim.admit("k", "m", input_tokens=20_000, output_tokens=1, now=0.0) == 0.0
    # 10k left, 20k more asked: 10k short at 500 tokens/s.
    assert lim.admit("k", "m", input_tokens=20_000, output_tokens=1, now=0.0) == pytest.approx(20.0)


def test_ttft_factors_have_the_published_spread_and_tail() -> None:
    r = Realism()
    xs = [r.ttft_factor(base_sigma=0.15, seed=0, key="k", n=n) for n in range(20_000)]
    p50 = percentile(xs, 50)
    # The two Claude probes the defaults fit (docs/simulator.md): p95/p50 about 3, p99/p50 5 to 7.6.
    assert 2.3 < percentile(xs, 95) / p50 < 3.6
    assert 5.0 < percentile(xs, 99) / p50 < 8.5
    assert r.ttft_factor(base_sigma=0.15, seed=0, key="k", n=7) == xs[7]  # a pure function of its key
    ys = [r.ttft_factor(base_sigma=0.15, seed=0, key="other", n=n) for n in range(2000)]
    assert ys != xs[:2000]  # another key (the other arm) draws its own


def _ttft(client: anthropic.Anthropic) -> float:
    t0 = time.perf_counter()
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "say hi"}]
    ) as s:
        for _ in s.text_stream:
            return time.perf_counter() - t0
    return time.perf_counter() - t0


def test_the_server_queues_a_keys_requests_and_keeps_other_keys_apart() -> None:
    # 2 requests per minute at time scale 0.05: one every 30 simulated s, 1.5 s of wall time.
    with SimServer(
        [parse_scenario(SCENARIO)], time_scale=0.05, realism=Realism(requests_per_minute=2, tail_share=0.0)
    ) as sim:
        a = anthropic.Anthropic(base_url=sim.base_url, api_key="key-a", max_retries=0)
        b = anthropic.Anthropic(base_url=sim.base_url, api_key="key-b", max_retries=0)
        t0 = time.perf_counter()
        first = [_ttft(a) for _ in range(2)]  # the bucket holds 2: neither waits
        since = time.perf_counter() - t0
        late = _ttft(a)
        other = _ttft(b)
        stats = sim.statistics()
    # The 3rd waited for the refill: 1.5 s of wall time from the first request, less the time that passed
    # (measured, so a slow start on a loaded machine does not eat the margin). A wait would be >= 1.5 s.
    assert max(first) < 1.0 and late > 1.5 - since - 0.1
    assert other < 1.0
    assert stats.queued["requests"] == 1 and stats.queued["waited_s"] > 0


def test_without_realism_the_server_is_unchanged() -> None:
    with SimServer([parse_scenario(SCENARIO)], time_scale=0.05) as sim:
        a = anthropic.Anthropic(base_url=sim.base_url, api_key="key-a", max_retries=0)
        for _ in range(8):
            _ttft(a)
        assert sim.statistics().queued == {}
