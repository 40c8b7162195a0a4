"""Behaviour the real API has and the simulator reproduces: request ids in errors, rate-limit headers, the
in-stream error event, stop sequences, tool_choice, thinking blocks."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import anthropic
import httpx2
import pytest

from speculate.sim import FaultConfig, SimServer
from speculate.sim.ratelimit import RateLimited, RateLimiter, RateLimits

from .conftest import MODEL, SYSTEM, TINY

FIRST = "why does page 2 repeat an item?"
HI = [{"role": "user", "content": "hi"}]
READ = {"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
GREP = {"name": "Grep", "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"},
                                                                          "output_mode": {"type": "string"}}}}  # fmt: skip


def ask(client: anthropic.Anthropic, **kw: Any) -> anthropic.types.Message:
    args: dict[str, Any] = {"model": MODEL, "max_tokens": 2000, "system": SYSTEM,
                            "messages": [{"role": "user", "content": FIRST}]} | kw  # fmt: skip
    return client.messages.create(**args)


def test_error_bodies_carry_the_request_id_of_the_header(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=MODEL, max_tokens=0, messages=HI)
    body = info.value.body
    assert body["type"] == "error" and body["request_id"].startswith("req_")  # type: ignore[index]
    assert body["request_id"] == info.value.response.headers["request-id"] == info.value.request_id  # type: ignore[index]
    ok = client.messages.with_raw_response.create(model=MODEL, max_tokens=10, messages=HI)
    assert ok.request_id not in (None, body["request_id"])  # type: ignore[index]


def test_rate_limit_headers_report_the_buckets(client: anthropic.Anthropic) -> None:
    headers = client.messages.with_raw_response.create(model=MODEL, max_tokens=10, messages=HI).headers
    for name in ("requests", "input-tokens", "output-tokens", "tokens"):
        assert int(headers[f"anthropic-ratelimit-{name}-limit"]) >= int(
            headers[f"anthropic-ratelimit-{name}-remaining"]
        )
        reset = dt.datetime.fromisoformat(headers[f"anthropic-ratelimit-{name}-reset"].replace("Z", "+00:00"))
        assert reset.tzinfo is not None


def test_buckets_drain_by_request_and_tokens_and_refill_over_a_minute() -> None:
    limiter = RateLimiter(RateLimits(requests_per_minute=60, input_tokens_per_minute=6000, enforce=True))
    limiter.charge("m", input_tokens=3000, output_tokens=10, now=0.0)
    h = limiter.headers("m", now=0.0, time_scale=1.0, wall=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert (h["anthropic-ratelimit-requests-remaining"], h["anthropic-ratelimit-input-tokens-remaining"]) == (
        "59",
        "3000",
    )
    assert h["anthropic-ratelimit-input-tokens-reset"] == "2026-01-01T00:00:30Z"  # half empty: 30 s to full
    assert h["anthropic-ratelimit-tokens-remaining"] == "3000"  # the tighter token bucket
    with pytest.raises(RateLimited) as info:
        limiter.charge("m", input_tokens=4000, output_tokens=10, now=0.0)
    assert info.value.bucket == "input-tokens" and info.value.wait_s == pytest.approx(10.0)
    limiter.charge("m", input_tokens=4000, output_tokens=10, now=10.0)  # 1,000 tokens came back in 10 s
    limiter.charge("other-model", input_tokens=6000, output_tokens=10, now=10.0)  # limits are per model


def test_enforced_limits_answer_429_with_retry_after() -> None:
    limits = RateLimits(input_tokens_per_minute=1000, enforce=True)
    with (
        SimServer([], time_scale=0.001, rate_limits=limits) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as c,
    ):
        c.messages.create(model=MODEL, max_tokens=10, messages=HI)
        with pytest.raises(anthropic.RateLimitError) as info:
            c.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x" * 8000}])
    assert "1,000 input tokens per minute" in info.value.body["error"]["message"]  # type: ignore[index]
    assert float(info.value.response.headers["retry-after"]) > 0
    assert info.value.response.headers["anthropic-ratelimit-input-tokens-limit"] == "1000"


def test_in_stream_error_event_ends_the_stream_without_message_stop() -> None:
    with SimServer([TINY], seed=0, time_scale=0.001, faults=FaultConfig(stream_error_rate=1.0)) as sim:
        with httpx2.Client(base_url=sim.base_url) as http:
            body = {"model": MODEL, "max_tokens": 2000, "system": SYSTEM, "stream": True,
                    "messages": [{"role": "user", "content": FIRST}]}  # fmt: skip
            text = http.post("/v1/messages", json=body).text
        with anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as c:
            with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
                with c.messages.stream(model=MODEL, max_tokens=2000, messages=HI) as stream:
                    stream.get_final_message()
        assert sim.statistics().faults["stream_error"] == 2
    events = [line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-1] == "error" and "message_stop" not in events
    assert '"type": "overloaded_error"' in text


def test_stop_sequences_cut_the_text_and_are_reported(client: anthropic.Anthropic) -> None:
    reply = ask(client, stop_sequences=["pager", "zzz"])
    assert reply.stop_reason == "stop_sequence" and reply.stop_sequence == "pager"
    assert [b.type for b in reply.content] == ["text"] and reply.content[0].text == "Let me look at the "  # type: ignore[union-attr]
    assert ask(client, stop_sequences=["zzz"]).stop_reason == "tool_use"


def test_tool_choice_shapes_the_answer(client: anthropic.Anthropic) -> None:
    tools = [READ, GREP]
    none = ask(client, tools=tools, tool_choice={"type": "none"})
    assert [b.type for b in none.content] == ["text"] and none.stop_reason == "end_turn"
    forced = ask(client, tools=tools, tool_choice={"type": "tool", "name": "Grep"})
    assert [b.type for b in forced.content] == ["tool_use"] and forced.content[0].name == "Grep"  # type: ignore[union-attr]
    one = ask(client, tools=tools, tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert [b.type for b in one.content] == ["text", "tool_use"]
    assert ask(client, tools=tools, tool_choice={"type": "any"}).content[0].type == "tool_use"


def test_thinking_blocks_follow_the_requests_thinking_setting(client: anthropic.Anthropic) -> None:
    messages = [{"role": "user", "content": FIRST}]
    plain = ask(client)
    assert "thinking" not in [b.type for b in plain.content]
    thought = ask(client, thinking={"type": "adaptive"})
    assert [b.type for b in thought.content] == ["thinking", "text", "tool_use", "tool_use"]
    block = thought.content[0]
    assert block.thinking.startswith("The bug must be in the slice") and block.signature  # type: ignore[union-attr]
    hidden = ask(client, thinking={"type": "adaptive", "display": "omitted"})
    assert hidden.content[0].thinking == "" and hidden.content[0].signature == block.signature  # type: ignore[union-attr]
    with client.messages.stream(model=MODEL, max_tokens=2000, system=SYSTEM, messages=messages,
                                thinking={"type": "adaptive"}) as stream:  # fmt: skip
        kinds = {e.delta.type for e in stream if e.type == "content_block_delta"}
        streamed = stream.get_final_message()
    assert {"thinking_delta", "signature_delta"} <= kinds
    assert streamed.content[0].model_dump() == block.model_dump()
    # Sending the block back (with its signature) is a valid next request.
    back = [*messages, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in thought.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                                         for b in thought.content if b.type == "tool_use"]}]  # fmt: skip
    assert ask(client, messages=back, thinking={"type": "adaptive"}).content[-1].type == "text"
    with pytest.raises(anthropic.BadRequestError, match="signature"):
        bad = json.loads(json.dumps(back))
        del bad[1]["content"][0]["signature"]
        ask(client, messages=bad, thinking={"type": "adaptive"})


def test_identical_requests_get_distinct_message_ids_but_the_same_content(
    client: anthropic.Anthropic,
) -> None:
    a, b = ask(client), ask(client)
    assert a.id != b.id and a.content == b.content
