"""The text-based tool-calling codec (seed 001): extraction, validation, feedback, rendering, orphan repair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from speculate.models.base import CacheKey, ModelError
from speculate.models.claude_cli import ClaudeCliModel
from speculate.models.text_tools import ORPHANED, extract, feedback, render, tools_reminder
from speculate.tools import default_tools
from speculate.types import Message, tool_result, user

VALIDATORS = {t.name: t.Input for t in default_tools()}


def call(body: object) -> str:
    return f"<tool_use>\n{body if isinstance(body, str) else json.dumps(body)}\n</tool_use>"


def test_valid_calls_are_extracted_and_the_rest_is_dropped_with_reasons() -> None:
    text = "\n".join(
        [
            "I will read it.",
            call({"name": "Read", "id": "c1", "input": {"file_path": "/p/a.txt"}}),
            call("for example: name the tool and give its input"),  # prose between tags: skipped silently
            call({"name": "WebSearch", "id": "c2", "input": {"query": "x"}}),
            call({"name": "Read", "id": "c3", "input": {"offset": "ten"}}),
            call({"name": "Glob", "input": {"pattern": "*.py"}}),
        ]
    )
    got = extract(text, VALIDATORS)
    assert got.text == "I will read it."
    assert len(got.uses) == 2 and (got.uses[0]["name"], got.uses[0]["id"]) == ("Read", "c1")
    assert got.uses[1]["name"] == "Glob" and got.uses[1]["id"].startswith("toolu_txt_")
    assert extract(text, VALIDATORS).uses[1]["id"] == got.uses[1]["id"]  # stable: the cache sees the same id
    assert len(got.invalid) == 2
    assert got.invalid[0].startswith("'WebSearch' is not one of the offered tools (Read, ")
    assert "Read: invalid input (file_path: Field required; offset: " in got.invalid[1]
    note = feedback(got.invalid)
    assert note.startswith("<system-reminder>") and "WebSearch" in note and "offset" in note


def test_rendering_wraps_user_words_keeps_reminders_outside_and_repairs_orphaned_calls() -> None:
    tools = [t.schema() for t in default_tools()]
    head = tools_reminder(tools)
    assert head.startswith("<system-reminder>") and json.loads(
        head.split("<tools>\n")[1].split("\n</tools>")[0]
    )
    asked = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Two reads."},
            {"type": "tool_use", "id": "c1", "name": "Read", "input": {"file_path": "/p/a"}},
            {"type": "tool_use", "id": "c2", "name": "Read", "input": {"file_path": "/p/b"}},
        ],
    }
    # The user interrupted after c1: c2 has no result; the next prompt arrives with a hook's reminder.
    reply = user(tool_result("c1", "alpha"), "<system-reminder>hook said hi</system-reminder>", "now b")
    text = render([user("look"), asked, reply])
    assert "<user>\nlook\n</user>" in text and "<user>\nnow b\n</user>" in text
    assert (
        "\n<system-reminder>hook said hi</system-reminder>\n" in text
        and "<user>\n<system-reminder" not in text
    )
    assert '<tool_use>\n{"name": "Read", "id": "c2"' in text and "<assistant>" in text
    results = [json.loads(x.split("</tool_result>")[0]) for x in text.split("<tool_result>\n")[1:]]
    assert results == [
        {"tool_use_id": "c2", "content": ORPHANED, "is_error": True},
        {"tool_use_id": "c1", "content": "alpha"},
    ]
    # Resuming after `asked`: only the reply is rendered, the orphan still repaired.
    assert '"tool_use_id": "c2"' in render([reply], before=asked) and "<assistant>" not in render(
        [reply], before=asked
    )


def test_the_cli_backend_names_a_missing_binary_and_refuses_a_conversation_without_a_prompt(
    tmp_path: Path,
) -> None:
    model = ClaudeCliModel(binary=tmp_path / "no-such-claude", cwd=tmp_path)
    key = CacheKey.build(model="claude-sonnet-4-6", system="s", tools=[])

    async def drain(messages: list[Message]) -> None:
        async for _ in model.stream(key, messages):
            pass

    with pytest.raises(ModelError, match=r"cannot run '.*no-such-claude'"):
        trio.run(drain, [user("hi")])
    with pytest.raises(ModelError, match="must end with a user message"):
        trio.run(drain, [])
