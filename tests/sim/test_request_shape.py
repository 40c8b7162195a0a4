"""The request shape check: pydantic over the SDK's request types, made strict, one problem reported in
the API's form (the path through the body, not pydantic's union member labels)."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsBase
from pydantic import TypeAdapter

from speculate.sim.request_shape import shape_problem

HI = [{"role": "user", "content": "hi"}]


def body(**kw: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": HI, **kw}


@pytest.mark.parametrize(
    ("request_body", "problem"),
    [
        (body(), None),
        (body(max_tokens="x"), "max_tokens: Input should be a valid integer"),
        (body(messages="hi"), "messages: Input should be a valid list"),
        (body(messages=[{"role": "user", "content": [{"type": "text"}]}]), "messages.0.content.0.text: Field required"),
        (
            body(messages=[{"role": "user", "content": [{"type": "txt", "text": "a"}]}]),
            "messages.0.content.0.type: Input tag 'txt' does not match any of the expected tags: ",
        ),
        (body(messages=[{"role": "bob", "content": "x"}]), "messages.0.role: Input tag 'bob' does not match"),
        (
            body(messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 3}]}]),
            "messages.0.content.0.tool_use_id: Input should be a valid string",
        ),
        (
            body(messages=[{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": []}]}]),
            "messages.0.content.0.input: Input should be a valid dictionary",
        ),
        (body(tools=[{"name": "a"}]), "tools.0.input_schema: Field required"),
        (body(tool_choice={"type": "zz"}), "tool_choice.type: Input tag 'zz' does not match"),
        (body(tool_choice={"type": "tool"}), "tool_choice.name: Field required"),
        (body(thinking={"type": "enabled"}), "thinking.budget_tokens: Field required"),
        (body(system=[{"type": "text"}]), "system.0.text: Field required"),
        (body(stop_sequences="x"), "stop_sequences: Input should be a valid list"),
    ],
)  # fmt: skip
def test_one_problem_named_by_its_path(request_body: dict[str, Any], problem: str | None) -> None:
    found = shape_problem(request_body)
    assert found == problem if problem is None else (found is not None and found.startswith(problem)), found


def test_the_sdk_types_as_they_stand_would_let_a_wrong_block_through() -> None:
    # Why the types are rebuilt: the SDK's lists are Iterable[...], which pydantic checks lazily.
    bad = body(messages=[{"role": "user", "content": [{"type": "text"}]}])
    TypeAdapter(MessageCreateParamsBase).validate_python(bad)  # no error
    assert shape_problem(bad) is not None
