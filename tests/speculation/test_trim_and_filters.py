"""What an accepted fork injects, and the suggestion filters' named reasons."""

from __future__ import annotations

import pytest

from speculate.speculation.filters import check
from speculate.speculation.trim import completed_part
from speculate.types import text, tool_result, user


def asst(*blocks: dict) -> dict:
    return {"role": "assistant", "content": list(blocks)}


def use(i: str) -> dict:
    return {"type": "tool_use", "id": i, "name": "Read", "input": {}}


def test_complete_fork_injected_whole() -> None:
    msgs = [user("run it"), asst(use("a")), user(tool_result("a", "ok")), asst(text("done"))]
    assert completed_part(msgs, complete=True) == msgs


def test_boundary_drops_unrun_calls_and_trailing_text() -> None:
    msgs = [user("fix it"), asst(use("a")), user(tool_result("a", "x")), asst(text("now edit"), use("b"))]
    out = completed_part(msgs, complete=False)
    assert out == msgs[:3]


def test_boundary_mid_batch_keeps_only_successful_results() -> None:
    msgs = [
        user("p"),
        asst(text("t"), use("a"), use("b"), use("c")),
        user(tool_result("a", "ok"), tool_result("b", "boom", is_error=True)),
    ]
    out = completed_part(msgs, complete=False)
    assert [b.get("id") for b in out[1]["content"] if b["type"] == "tool_use"] == ["a"]
    assert [b["tool_use_id"] for b in out[2]["content"]] == ["a"]


def test_boundary_with_nothing_done_leaves_the_prompt() -> None:
    msgs = [user("p"), asst(text("I will edit"), use("a"))]
    assert completed_part(msgs, complete=False) == [user("p")]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("done", "done"),
        ("Suggestion: run tests", "prefixed_label"),
        ("- run the tests", "formatting"),
        ("the user would run tests", "meta"),
        ("Error: rate limit exceeded", "error_text"),
        ("x" * 120, "too_long"),
        ("please run all of the unit tests and then also the lint and type checks", "too_many_words"),
        ("hmm", "too_few_words"),
        ("Run tests. Then commit.", "multiple_sentences"),
        ("great job on that", "evaluative"),
        ("I'll run the tests now", "assistant_voice"),
    ],
)
def test_filters_name_the_rule(raw: str, reason: str) -> None:
    v = check(raw)
    assert not v.ok and v.reason == reason


@pytest.mark.parametrize(
    "raw",
    ["run the tests", '"fix it and run the tests"', "commit", "yes", "rename total to subtotal in cart.py"],
)
def test_filters_accept_plausible_prompts(raw: str) -> None:
    v = check(raw)
    assert v.ok and v.text == raw.strip('"')
