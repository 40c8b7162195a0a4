"""Latency against the model (scaled), replay of recorded traces, and the serve CLI's argument errors."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import anthropic
import pytest

from speculate.sim import (
    PROFILES,
    Replay,
    SimServer,
    TraceError,
    TraceWriter,
    canonical_key,
    find_profile,
    serve_main,
)
from speculate.sim.cache import PromptCache, units_of
from speculate.sim.tokens import output_tokens

from .conftest import MODEL, SYSTEM, TINY

SCALE = 0.1
FIRST = "why does page 2 repeat an item?"


def measure(client: anthropic.Anthropic, **kw: object) -> tuple[float, float, anthropic.types.Message]:
    began = time.monotonic()
    first = None
    with client.messages.stream(model=MODEL, max_tokens=2000, **kw) as stream:  # type: ignore[arg-type]
        for event in stream:
            if first is None and event.type == "content_block_delta":
                first = time.monotonic() - began
        final = stream.get_final_message()
    assert first is not None
    return first, time.monotonic() - began, final


def test_ttft_and_total_follow_the_latency_model_at_scale() -> None:
    profile = dataclasses.replace(find_profile(MODEL), jitter=0.0)  # type: ignore[arg-type]
    guide = "Conventions: small functions, tests first. " * 900  # ~9,900 tokens of uncached prompt
    system = [{"type": "text", "text": SYSTEM + guide, "cache_control": {"type": "ephemeral"}}]
    body = {"model": MODEL, "system": system, "messages": [{"role": "user", "content": FIRST}]}
    prompt_tokens = sum(u.tokens for u in units_of(body))
    with (
        SimServer([TINY], time_scale=SCALE, profiles=[profile]) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key="k") as c,
    ):
        measure(
            c, messages=[{"role": "user", "content": "warm up"}]
        )  # first-call imports and connection set-up
        ttft, total, message = measure(c, system=system, messages=body["messages"])
        out = output_tokens([b.model_dump(exclude_none=True) for b in message.content])
        want_ttft = profile.ttft_s + prompt_tokens / profile.prefill_tok_s
        want_total = want_ttft + out / profile.decode_tok_s
        assert want_ttft * SCALE <= ttft <= want_ttft * SCALE * 1.15 + 0.1
        assert want_total * SCALE <= total <= want_total * SCALE * 1.15 + 0.1
        # The same prompt again reads the cache: prefill at the cached rate, so the first token comes sooner.
        cached_ttft, _, again = measure(c, system=system, messages=body["messages"])
        assert again.usage.cache_read_input_tokens == prompt_tokens - 0 - again.usage.input_tokens
        want_cached = (
            profile.ttft_s
            + again.usage.cache_read_input_tokens / profile.cached_prefill_tok_s
            + again.usage.input_tokens / profile.prefill_tok_s
        )
        assert want_cached * SCALE <= cached_ttft <= want_cached * SCALE * 1.15 + 0.1
        assert cached_ttft < ttft


def test_jitter_is_seeded() -> None:
    from speculate.sim.latency import timing

    p = PROFILES[0]
    a = timing(p, uncached_tokens=100, cached_tokens=0, seed=1, key="k")
    assert a == timing(p, uncached_tokens=100, cached_tokens=0, seed=1, key="k")
    assert a != timing(p, uncached_tokens=100, cached_tokens=0, seed=2, key="k")


def test_cost_uses_the_price_table() -> None:
    sonnet = find_profile("claude-sonnet-4-6")
    assert sonnet is not None
    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 1_000_000,
        "cache_creation_input_tokens": 1_000_000,
        "cache_read_input_tokens": 1_000_000,
    }
    assert sonnet.cost_usd(usage) == pytest.approx(3 + 15 + 3.75 + 0.30)


def test_recorded_trace_replays_with_recorded_timings_in_another_root(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    recorded_system = "You are a coding agent.\nWorking directory: /home/alice/shop\n"
    request = {"model": MODEL, "max_tokens": 300, "system": recorded_system, "stream": True,
               "messages": [{"role": "user", "content": "what is in the readme?"}]}  # fmt: skip
    response = {"id": "msg_x", "type": "message", "role": "assistant", "model": MODEL, "stop_reason": "tool_use",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/home/alice/shop/README.md"}}],
                "usage": {"input_tokens": 10, "output_tokens": 5}}  # fmt: skip
    with TraceWriter(trace) as writer:
        writer.write(request, response, ttft_s=2.0, total_s=3.0)
    replayed_system = recorded_system.replace("/home/alice/shop", "/tmp/bob")
    ask = {**request, "system": replayed_system}
    # Cache markers and streaming do not change the answer: same key.
    assert canonical_key(ask) == canonical_key(
        {
            **ask,
            "stream": False,
            "system": [{"type": "text", "text": replayed_system, "cache_control": {"type": "ephemeral"}}],
        }
    )
    with (
        SimServer([trace], time_scale=SCALE) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key="k") as c,
    ):
        began = time.monotonic()
        message = c.messages.create(
            model=MODEL, max_tokens=300, system=replayed_system, messages=ask["messages"]
        )
        elapsed = time.monotonic() - began
        assert message.content[0].input == {"file_path": "/tmp/bob/README.md"}  # type: ignore[union-attr]
        assert 3.0 * SCALE <= elapsed <= 3.0 * SCALE + 0.25  # slack: a fresh client's set-up
        assert sim.statistics().engine.replayed == 1


def test_malformed_trace_names_file_and_line(tmp_path: Path) -> None:
    trace = tmp_path / "bad.jsonl"
    good = {"request": {"messages": []}, "response": {"content": []}, "timings": {"ttft_s": 1, "total_s": 2}}
    trace.write_text(json.dumps(good) + "\n" + json.dumps({**good, "timings": {"ttft_s": -1}}) + "\n")
    with pytest.raises(TraceError, match=rf"{trace}:2: 'timings'"):
        Replay(trace)


def test_serve_main_rejects_a_bad_scenario_with_its_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nturns: []\n")
    assert serve_main(["--scenario", str(bad)]) == 2
    assert f"{bad}:2: turns must be a non-empty list" in capsys.readouterr().err


def test_pure_cache_plan_counts_match_usage_identity() -> None:
    body = {"model": MODEL, "system": [{"type": "text", "text": "x" * 5000, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hello"}]}  # fmt: skip
    plan = PromptCache().plan(units_of(body), now=0.0, min_tokens=1024)
    assert (plan.creation_tokens, plan.read_tokens, plan.input_tokens) == (1250, 0, 2)
