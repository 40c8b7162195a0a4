"""Prompt-cache hits and misses through the SDK, exactly as the documented rules say."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from speculate.sim import SimServer
from speculate.sim.cache import CacheControlError, PromptCache, units_of
from speculate.sim.tokens import block_tokens

from .conftest import MODEL, SYSTEM

EPHEMERAL = {"type": "ephemeral"}
TOOLS: list[dict[str, Any]] = [
    {
        "name": "Read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    },
    {
        "name": "Bash",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
]
GUIDE = "Project conventions: keep functions small, test everything, explain briefly. " * 80  # ~1,600 tokens


def system_blocks(guide: str = GUIDE) -> list[dict[str, Any]]:
    return [{"type": "text", "text": SYSTEM}, {"type": "text", "text": guide, "cache_control": EPHEMERAL}]


def conversation(turns: int) -> list[dict[str, Any]]:
    """``turns`` user/assistant exchanges, then a final user prompt carrying the breakpoint."""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"question {i}: " + "details " * 30}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}: " + "because " * 30}]},
        ]
    messages.append(
        {"role": "user", "content": [{"type": "text", "text": "and now?", "cache_control": EPHEMERAL}]}
    )
    return messages


def prefix_tokens(tools: list[dict[str, Any]], system: list[dict[str, Any]]) -> int:
    return sum(block_tokens(b) for b in [*tools, *system])


@pytest.fixture
def sdk() -> Iterator[tuple[SimServer, anthropic.Anthropic]]:
    with (
        SimServer([], time_scale=0.001) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as c,
    ):
        yield sim, c


def create(c: anthropic.Anthropic, **kw: Any) -> anthropic.types.Usage:
    args = {
        "model": MODEL,
        "max_tokens": 500,
        "tools": TOOLS,
        "system": system_blocks(),
        "messages": conversation(2),
    } | kw
    usage = c.messages.create(**args).usage
    total = c.messages.count_tokens(**{k: v for k, v in args.items() if k != "max_tokens"}).input_tokens
    # The documented identity: every input token is exactly one of uncached, written or read.
    assert (
        usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
        == total
    )
    return usage


def test_write_then_read_the_whole_prefix(sdk: tuple[SimServer, anthropic.Anthropic]) -> None:
    sim, c = sdk
    first = create(c)
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 0
    # Breakpoint on the last block: nothing is left uncached.
    assert first.input_tokens == 0
    second = create(c)
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    assert sim.statistics().cache_hits == 1


@pytest.mark.parametrize(
    "fork",
    [
        pytest.param({"system": system_blocks(GUIDE[:-1] + "!")}, id="one-system-byte"),
        pytest.param({"tools": list(reversed(TOOLS))}, id="tool-order"),
        pytest.param(
            {"tools": [TOOLS[0], {**TOOLS[1], "description": "Run a command!"}]}, id="tool-description"
        ),
    ],
)
def test_fork_differing_before_the_system_breakpoint_misses_everything(
    sdk: tuple[SimServer, anthropic.Anthropic], fork: dict[str, Any]
) -> None:
    _, c = sdk
    parent = create(c)
    child = create(c, **fork)
    assert child.cache_read_input_tokens == 0
    assert child.cache_creation_input_tokens == parent.cache_creation_input_tokens


def test_thinking_change_keeps_tools_and_system_but_misses_messages(
    sdk: tuple[SimServer, anthropic.Anthropic],
) -> None:
    _, c = sdk
    parent = create(c, max_tokens=3000)
    child = create(c, max_tokens=3000, thinking={"type": "enabled", "budget_tokens": 1024})
    assert child.cache_read_input_tokens == prefix_tokens(TOOLS, system_blocks())
    assert (
        child.cache_creation_input_tokens
        == parent.cache_creation_input_tokens - child.cache_read_input_tokens
    )
    tool_choice = create(c, max_tokens=3000, tool_choice={"type": "any"})
    assert tool_choice.cache_read_input_tokens == prefix_tokens(TOOLS, system_blocks())


def test_fork_appending_one_user_message_reads_the_parents_cache(
    sdk: tuple[SimServer, anthropic.Anthropic],
) -> None:
    _, c = sdk
    parent_messages = conversation(3)
    parent = create(c, messages=parent_messages)
    parent_total = parent.cache_creation_input_tokens
    # The fork: the parent's request, the assistant's reply, then the predicted prompt; the breakpoint moves.
    fork_messages = [dict(m) for m in parent_messages]
    fork_messages[-1] = {"role": "user", "content": [{"type": "text", "text": "and now?"}]}
    fork_messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "here is the answer"}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": "fix it and run the tests", "cache_control": EPHEMERAL}],
        },
    ]
    fork = create(c, messages=fork_messages)
    assert fork.cache_read_input_tokens == parent_total
    assert fork.cache_creation_input_tokens == block_tokens(
        {"type": "text", "text": "here is the answer"}
    ) + block_tokens({"type": "text", "text": "fix it and run the tests"})


def test_lookback_stops_at_twenty_blocks(sdk: tuple[SimServer, anthropic.Anthropic]) -> None:
    _, c = sdk
    create(c, messages=conversation(1))  # entry after 3 message blocks
    far = conversation(1)
    far[-1] = {
        "role": "user",
        "content": [{"type": "text", "text": "and now?"}]
        + [{"type": "text", "text": f"note {i}"} for i in range(20)],
    }
    far[-1]["content"][-1]["cache_control"] = EPHEMERAL
    # The window is the breakpoint and the 19 positions before it (the docs: a breakpoint on block 30 checks
    # blocks 30 down to 11). Entry 20 blocks back: missed, only the system breakpoint's entry is read.
    assert create(c, messages=far).cache_read_input_tokens == prefix_tokens(TOOLS, system_blocks())
    near = conversation(1)
    near[-1] = {
        "role": "user",
        "content": [{"type": "text", "text": "and now?"}]
        + [{"type": "text", "text": f"note {i}"} for i in range(19)],
    }
    near[-1]["content"][-1]["cache_control"] = EPHEMERAL
    assert create(c, messages=near).cache_read_input_tokens > prefix_tokens(TOOLS, system_blocks())


def test_below_the_minimum_nothing_is_cached(sdk: tuple[SimServer, anthropic.Anthropic]) -> None:
    _, c = sdk
    small = [{"type": "text", "text": "short guide", "cache_control": EPHEMERAL}]
    msgs = [{"role": "user", "content": "hi"}]
    for _ in range(2):
        usage = create(c, system=small, messages=msgs, tools=[])
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)
    # Haiku 4.5's minimum is 4,096 tokens: the ~1,600-token guide caches on Sonnet but not on Haiku.
    assert create(c, model="claude-haiku-4-5").cache_creation_input_tokens == 0
    assert create(c).cache_creation_input_tokens > 0


def test_automatic_top_level_breakpoint_caches_up_to_the_last_block(
    sdk: tuple[SimServer, anthropic.Anthropic],
) -> None:
    _, c = sdk
    msgs = [{"role": "user", "content": "explain the pager " * 10}]
    system = [{"type": "text", "text": GUIDE}]
    first = create(c, system=system, messages=msgs, cache_control=EPHEMERAL)
    assert first.cache_creation_input_tokens > 0 and first.input_tokens == 0
    assert (
        create(c, system=system, messages=msgs, cache_control=EPHEMERAL).cache_read_input_tokens
        == first.cache_creation_input_tokens
    )


def test_entry_is_invisible_until_the_writing_response_has_started() -> None:
    # time_scale 0.5: TTFT of ~1.4 simulated seconds is ~0.7 s of wall time, long enough to overlap
    # even when the second request's client is slow to start on a loaded machine.
    with (
        SimServer([], time_scale=0.5) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as c,
    ):
        started = threading.Event()
        results: list[anthropic.types.Usage] = []

        def slow() -> None:
            started.set()
            results.append(create(c))

        writer = threading.Thread(target=slow)
        writer.start()
        started.wait()
        concurrent = create(c)  # arrives while the first is still before its first token
        writer.join()
        after = create(c)
    assert results[0].cache_creation_input_tokens > 0
    assert concurrent.cache_read_input_tokens == 0 and concurrent.cache_creation_input_tokens > 0
    assert after.cache_read_input_tokens == results[0].cache_creation_input_tokens


def test_ttl_is_five_minutes_refreshed_on_hit_or_one_hour() -> None:
    body: dict[str, Any] = {
        "model": MODEL,
        "system": system_blocks(),
        "messages": [{"role": "user", "content": "hi"}],
    }
    units = units_of(body)
    cache = PromptCache()

    def run(now: float) -> int:
        plan = cache.plan(units, now=now, min_tokens=1024)
        cache.commit(plan, now=now)
        return plan.read_tokens

    assert run(0.0) == 0
    assert run(299.0) > 0  # alive, and the hit refreshes the TTL to 599
    assert run(598.0) > 0
    assert run(898.5) == 0  # 300.5 s after the last hit: expired, written again
    long_body = {
        **body,
        "system": [
            system_blocks()[0],
            {**system_blocks()[1], "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        ],
    }
    long_units = units_of(long_body)
    cache = PromptCache()  # same key as the 5-minute entry above, which is still alive: start afresh
    first = cache.plan(long_units, now=1000.0, min_tokens=1024)
    assert first.write_tokens_1h > 0 and first.write_tokens_5m == 0
    cache.commit(first, now=1000.0)
    assert cache.plan(long_units, now=1000.0 + 3000, min_tokens=1024).read_tokens == first.write_tokens_1h


def test_a_longer_ttl_after_a_shorter_one_is_rejected(sdk: tuple[SimServer, anthropic.Anthropic]) -> None:
    _, client = sdk
    with pytest.raises(
        anthropic.BadRequestError, match=r"system\.1\.cache_control\.ttl: a ttl='1h' cache_control"
    ):
        client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}],
            system=[{"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
                    {"type": "text", "text": "b", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        )  # fmt: skip
    client.messages.create(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}],
        system=[{"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}],
    )  # fmt: skip
    with pytest.raises(CacheControlError, match=r"messages\.0\.content\.0"):
        units_of({"tools": [{**TOOLS[0], "cache_control": {"type": "ephemeral"}}], "cache_control": {"type": "ephemeral", "ttl": "1h"},
                  "messages": [{"role": "user", "content": "x"}]})  # fmt: skip


def test_entry_lifetime_counts_from_the_start_of_the_request() -> None:
    body = {"model": MODEL, "system": [{"type": "text", "text": "p " * 3000, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    units = units_of(body)
    cache = PromptCache()
    cache.commit(cache.plan(units, now=0.0, min_tokens=1024), now=250.0, requested=0.0)  # a slow first token
    assert cache.plan(units, now=299.0, min_tokens=1024).read_tokens > 0
    assert (
        cache.plan(units, now=301.0, min_tokens=1024).read_tokens == 0
    )  # 5 min after the request, not the token
