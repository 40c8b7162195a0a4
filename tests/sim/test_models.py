"""Models: the current lineup, newer ids of known families, the Models API's paging, and what each model
accepts (thinking modes, forced tool use, sampling, prefill, system-role turns, context window, tokenizer)."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from speculate.sim import find_profile

from .conftest import MODEL

HI = [{"role": "user", "content": "hi"}]
TOOL = {"name": "t", "input_schema": {"type": "object"}}


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("claude-opus-5-5", "claude-opus-5-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),  # a dated alias
        ("claude-opus-5-20260724", "claude-opus-5"),  # a dated snapshot of a known version
        ("claude-haiku-5-5", "claude-haiku-4-5"),  # newer than any haiku here: the newest haiku
        ("claude-opus-6", "claude-opus-5-5"),
        ("claude-fable-5-2", "claude-fable-5-1"),
        ("claude-opus-4-1", None),  # retired on the Claude API
        ("claude-mythos-5", None),  # no profile for the family
        ("gpt-4o", None),
    ],
)
def test_model_ids_resolve_to_profiles(model: str, profile: str | None) -> None:
    found = find_profile(model)
    assert (found.name if found else None) == profile


def test_a_newer_id_of_a_known_family_is_served_and_echoed(client: anthropic.Anthropic) -> None:
    reply = client.messages.create(model="claude-haiku-5-5", max_tokens=50, messages=HI)
    assert reply.model == "claude-haiku-5-5"
    info = client.models.retrieve("claude-haiku-5-5")
    assert info.id == "claude-haiku-5-5" and "simulated as claude-haiku-4-5" in info.display_name


def test_models_list_pages_newest_first(client: anthropic.Anthropic) -> None:
    everything = client.models.list(limit=1000)
    ids = [m.id for m in everything.data]
    assert not everything.has_more and ids[0] == everything.first_id and ids[-1] == everything.last_id
    created = [m.created_at for m in everything.data]
    assert created == sorted(created, reverse=True)
    first = client.models.list(limit=2)
    assert [m.id for m in first.data] == ids[:2] and first.has_more
    after = client.models.list(limit=3, after_id=ids[1])
    assert [m.id for m in after.data] == ids[2:5]
    before = client.models.list(limit=2, before_id=ids[3])
    assert [m.id for m in before.data] == ids[1:3] and before.has_more
    assert [m.id for m in client.models.list(limit=2)] == ids  # the SDK's auto-pagination walks every page
    assert client.models.retrieve("claude-sonnet-4-5").lifecycle == "deprecated"
    with pytest.raises(anthropic.BadRequestError, match="limit"):
        client.models.list(limit=0)


def create(client: anthropic.Anthropic, **kw: Any) -> anthropic.types.Message:
    args: dict[str, Any] = {"model": MODEL, "max_tokens": 2000, "messages": HI} | kw
    return client.messages.create(**args)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "claude-opus-5-5", "thinking": {"type": "disabled"}}, '"thinking.type.disabled" is not supported'),
        ({"model": "claude-opus-5", "thinking": {"type": "enabled", "budget_tokens": 1024}},
         '"thinking.type.enabled" is not supported'),
        ({"model": "claude-haiku-4-5", "thinking": {"type": "adaptive"}}, "adaptive thinking is not supported"),
        ({"model": "claude-opus-5-5", "tools": [TOOL], "tool_choice": {"type": "any"}},
         'tool_choice: type "tool" and "any" are not supported for this model.'),
        ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "t"}, "thinking": {"type": "adaptive"}},
         "Thinking may not be enabled when tool_choice forces tool use"),
        ({"model": "claude-opus-5", "extra_body": {"temperature": 0.2}}, "temperature: this model does not support"),
        ({"model": "claude-sonnet-5", "extra_body": {"top_k": 5}}, "top_k"),
        ({"messages": [*HI, {"role": "assistant", "content": "Sure"}]}, "does not support assistant message prefill"),
        ({"messages": [*HI, {"role": "system", "content": [{"type": "image", "source": {}}]}]},
         "messages.1.content.0.type: Input should be 'text'"),  # the SDK's SystemMessageParam
        ({"stop_sequences": ["ok", " "]}, "stop_sequences.1"),
        ({"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "word " * 170_000}]},
         "prompt is too long: 212500 tokens > 200000 maximum"),
        ({"max_tokens": 128_001}, "max_tokens: 128001 > 128000"),
    ],
)  # fmt: skip
def test_what_a_model_does_not_accept_is_a_400_naming_it(
    client: anthropic.Anthropic, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        if kwargs.get("max_tokens", 0) > 21_000:
            with create_stream(client, **kwargs):
                pass
        else:
            create(client, **kwargs)
    assert message in info.value.body["error"]["message"]  # type: ignore[index]


def create_stream(client: anthropic.Anthropic, **kw: Any) -> Any:
    args: dict[str, Any] = {"model": MODEL, "max_tokens": 2000, "messages": HI} | kw
    return client.messages.stream(**args)


def test_what_the_models_do_accept(client: anthropic.Anthropic) -> None:
    create(
        client, model="claude-haiku-4-5", messages=[*HI, {"role": "assistant", "content": "Sure"}]
    )  # prefill
    create(
        client, model="claude-opus-5", extra_body={"temperature": 1.0, "top_p": 0.99}
    )  # the defaults stay accepted
    create(client, model="claude-opus-5-5")  # thinking omitted: adaptive, always on
    create(
        client, messages=[*HI, {"role": "system", "content": "Working directory: /w"}]
    )  # a system-role turn


def test_newer_tokenizer_counts_more_tokens(client: anthropic.Anthropic) -> None:
    text = [{"role": "user", "content": "x" * 4000}]
    old = client.messages.count_tokens(model="claude-sonnet-4-6", messages=text).input_tokens
    new = client.messages.count_tokens(model="claude-opus-5-5", messages=text).input_tokens
    assert (old, new) == (1000, 1300)


@pytest.mark.parametrize(
    ("model", "words", "cached"),
    [
        ("claude-opus-5-5", 500, True),  # 512-token minimum: ~650 tokens under the newer tokenizer cache
        ("claude-sonnet-4-6", 500, False),  # 1,024 minimum (the current docs; an earlier edition said 2,048)
        ("claude-sonnet-4-6", 1000, True),
        ("claude-haiku-4-5", 2000, False),  # 4,096 minimum
    ],
)
def test_cache_minimums_follow_the_docs(
    client: anthropic.Anthropic, model: str, words: int, cached: bool
) -> None:
    system = [{"type": "text", "text": "rule " * words, "cache_control": {"type": "ephemeral"}}]
    usage = create(client, model=model, system=system).usage
    assert (usage.cache_creation_input_tokens > 0) is cached


def test_cache_reads_cost_what_the_price_list_says() -> None:
    read = {"cache_read_input_tokens": 1_000_000}
    prices = {
        m: find_profile(m).cost_usd(read) for m in ("claude-opus-5-5", "claude-fable-5-1", "claude-sonnet-5")
    }  # type: ignore[union-attr]
    assert prices == pytest.approx(
        {"claude-opus-5-5": 0.20, "claude-fable-5-1": 0.25, "claude-sonnet-5": 0.20}
    )
