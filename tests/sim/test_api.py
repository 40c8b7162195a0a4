"""The simulator through the real anthropic SDK: create, stream, tools, models, token counting, errors."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
import trio

from speculate.prompts import SUGGESTION_INSTRUCTION, system_prompt
from speculate.sim import FALLBACK_PREFIX, SimServer

from .conftest import MODEL, ROOT, SYSTEM, TINY

FIRST = "why does page 2 repeat an item?"


def ask(client: anthropic.Anthropic, messages: list[dict[str, Any]], **kw: Any) -> anthropic.types.Message:
    return client.messages.create(model=MODEL, max_tokens=2000, system=SYSTEM, messages=messages, **kw)


def first_turn_messages(client: anthropic.Anthropic) -> list[dict[str, Any]]:
    """Run turn 1 of the tiny scenario to its end, answering tool calls with canned results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": FIRST}]
    while True:
        reply = ask(client, messages)
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
        )
        if reply.stop_reason != "tool_use":
            return messages
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
            for b in reply.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})


def test_create_returns_the_scripted_step_with_root_substituted(client: anthropic.Anthropic) -> None:
    reply = ask(client, [{"role": "user", "content": FIRST}])
    assert reply.stop_reason == "tool_use"
    assert [b.type for b in reply.content] == ["text", "tool_use", "tool_use"]
    read, grep = reply.content[1], reply.content[2]
    assert read.name == "Read" and read.input == {"file_path": f"{ROOT}/src/pager.py"}
    assert grep.input == {"pattern": "def page", "output_mode": "content"}
    assert read.id.startswith("toolu_") and read.id != grep.id
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


def test_stream_reassembles_tool_input_from_json_deltas(client: anthropic.Anthropic) -> None:
    kinds: list[str] = []
    partial = ""
    with client.messages.stream(
        model=MODEL, max_tokens=2000, system=SYSTEM, messages=[{"role": "user", "content": FIRST}]
    ) as stream:
        for event in stream:
            kinds.append(event.type)
            if (
                event.type == "content_block_delta"
                and event.delta.type == "input_json_delta"
                and event.index == 1
            ):
                partial += event.delta.partial_json
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "message_delta" in kinds
    assert json.loads(partial) == {"file_path": f"{ROOT}/src/pager.py"}
    assert final.content[1].input == {"file_path": f"{ROOT}/src/pager.py"}
    # The streamed message is the same message the JSON endpoint returns, but for its own id.
    again = ask(client, [{"role": "user", "content": FIRST}])
    assert final.model_dump() | {"content": None, "id": None} == again.model_dump() | {
        "content": None,
        "id": None,
    }
    assert final.id != again.id and final.id.startswith("msg_")


def test_raw_stream_has_pings_and_cumulative_usage(client: anthropic.Anthropic) -> None:
    stream = client.messages.create(
        model=MODEL,
        max_tokens=2000,
        system=SYSTEM,
        messages=[{"role": "user", "content": FIRST}],
        stream=True,
    )
    events = list(stream)
    assert [e.type for e in events].count("message_start") == 1
    start, delta = events[0], next(e for e in events if e.type == "message_delta")
    assert start.message.usage.cache_read_input_tokens == 0
    assert delta.usage.output_tokens > start.message.usage.output_tokens
    assert delta.delta.stop_reason == "tool_use"
    # The SDK hides pings from the typed iterator; the raw bytes carry one.
    raw = client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=2000,
        system=SYSTEM,
        messages=[{"role": "user", "content": FIRST}],
        stream=True,
    )
    text = raw.http_response.read().decode()
    assert "event: ping" in text


def test_whole_turn_then_next_turn_follow_the_script(client: anthropic.Anthropic) -> None:
    messages = first_turn_messages(client)
    assert messages[-1]["content"][0]["text"].startswith("The slice end")
    messages.append({"role": "user", "content": "fix it and run the tests"})
    reply = ask(client, messages)
    assert reply.content[0].type == "tool_use" and reply.content[0].name == "Edit"


def test_suggestion_mode_gets_the_turns_suggestion(client: anthropic.Anthropic) -> None:
    messages = first_turn_messages(client)
    reply = ask(client, [*messages, {"role": "user", "content": SUGGESTION_INSTRUCTION}])
    assert reply.stop_reason == "end_turn"
    assert [b.text for b in reply.content if b.type == "text"] == ["fix it and run the tests"]


def test_a_differing_suggestion_runs_its_suggestion_steps(client: anthropic.Anthropic) -> None:
    messages = first_turn_messages(client)
    messages.append({"role": "user", "content": "fix it and run the tests"})
    while True:
        reply = ask(client, messages)
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
        )
        if reply.stop_reason != "tool_use":
            break
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                    for b in reply.content
                    if b.type == "tool_use"
                ],
            }
        )
    assert (
        ask(client, [*messages, {"role": "user", "content": SUGGESTION_INSTRUCTION}]).content[0].text
        == "commit it"
    )
    forked = ask(client, [*messages, {"role": "user", "content": "commit it"}])
    assert forked.content[0].name == "Bash" and forked.content[0].input["command"].startswith("git commit")


def test_unscripted_request_gets_marked_fallback_not_error(client: anthropic.Anthropic) -> None:
    reply = ask(client, [{"role": "user", "content": "write me a poem"}])
    assert reply.stop_reason == "end_turn"
    assert reply.content[0].text.startswith(FALLBACK_PREFIX)
    assert "write me a poem" in reply.content[0].text


def test_same_request_same_answer_per_seed_and_ids_differ_across_seeds() -> None:
    def first_ids(seed: int) -> list[str]:
        with (
            SimServer([TINY], seed=seed, time_scale=0.001) as sim,
            anthropic.Anthropic(base_url=sim.base_url, api_key="k") as c,
        ):
            return [
                b.id for b in ask(c, [{"role": "user", "content": FIRST}]).content if b.type == "tool_use"
            ]

    assert first_ids(1) == first_ids(1)
    assert first_ids(1) != first_ids(2)


def test_models_and_count_tokens(client: anthropic.Anthropic) -> None:
    names = [m.id for m in client.models.list().data]
    assert len(names) == len(set(names))
    assert {"claude-sonnet-4-5", "claude-sonnet-4-6", "claude-haiku-4-5", "claude-opus-5-5"} <= set(names)
    assert client.models.retrieve("claude-haiku-4-5").display_name.endswith("(simulated)")
    short = client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "x" * 40}])
    long = client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "x" * 4000}])
    assert (short.input_tokens, long.input_tokens) == (10, 1000)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages.0.content.0.text: Field required",
        ),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages.0.role"),
        ({"messages": []}, "messages: at least one message"),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "extra_body": {"bogus": 1}},
            "bogus: Extra inputs are not permitted",
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "A", "input_schema": {"type": "object"}}] * 2,
            },
            "tools: Tool names must be unique",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
                    },
                    {"role": "user", "content": "b"},
                ]
            },
            "messages.2: `tool_use` ids were found without `tool_result`",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}],
                    }
                ]
            },
            "messages.0.content.0: unexpected `tool_use_id`",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": f"b{i}", "cache_control": {"type": "ephemeral"}}
                            for i in range(5)
                        ],
                    }
                ]
            },
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "thinking": {"type": "enabled", "budget_tokens": 10},
            },
            "thinking.budget_tokens",
        ),
    ],
)
def test_malformed_request_is_rejected_naming_the_field(
    client: anthropic.Anthropic, kwargs: dict[str, Any], field: str
) -> None:
    args: dict[str, Any] = {"model": MODEL, "max_tokens": 100} | kwargs
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(**args)
    assert info.value.status_code == 400
    assert info.value.body["type"] == "error"  # type: ignore[index]
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert field in info.value.body["error"]["message"]  # type: ignore[index]


def test_unknown_model_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError, match="model: claude-nonexistent"):
        client.messages.create(
            model="claude-nonexistent", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )


def test_async_client_under_trio_streams_concurrently() -> None:
    async def main() -> list[str]:
        with SimServer([TINY], time_scale=0.001) as sim:
            async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="k") as client:
                texts: list[str] = []

                async def one(prompt: str) -> None:
                    async with client.messages.stream(
                        model=MODEL,
                        max_tokens=500,
                        system=system_prompt(ROOT),
                        messages=[{"role": "user", "content": prompt}],
                    ) as stream:
                        final = await stream.get_final_message()
                    texts.append(final.content[0].text)  # type: ignore[union-attr]

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(one, FIRST)
                    nursery.start_soon(one, "something unscripted")
                return sorted(texts)

    texts = trio.run(main)
    assert texts[0].startswith("Let me look") and texts[1].startswith(FALLBACK_PREFIX)
