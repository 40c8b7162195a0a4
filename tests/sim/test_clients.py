"""Requests as other clients write them: Claude Code's wrapping of the prompt, its working-directory line,
its tool set and its suggestion wording reach the same scripted answers as speculate's own agent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anthropic
import pytest

from speculate.prompts import SUGGESTION_INSTRUCTION
from speculate.sim import FALLBACK_PREFIX, SimServer
from speculate.sim.clients import ClientConventions, normalize_prompt, read_conversation
from speculate.sim.intents import RenderError, render, shell_command
from speculate.sim.schema import problem

from .conftest import FIXTURES, TINY

CC_TOOLS: list[dict[str, Any]] = json.loads((FIXTURES / "claude_code_tools.json").read_text())
CC_MODEL = "claude-opus-5-5"  # Claude Code 2.1.332's default model id
ROOT = "/home/dev/project"
REMINDER = "<system-reminder>\nAs you answer the user's questions, you can use the following context: ...\n</system-reminder>\n"
CC_SUGGEST = (
    "[SUGGESTION MODE: Suggest what the user might naturally type next into Claude Code.]\n\n"
    "Format: 2-12 words, match the user's style. Or nothing."
)
FIRST = "why does page 2 repeat an item?"


def cc_first(prompt: str = FIRST) -> list[dict[str, Any]]:
    """The opening of a Claude Code conversation: reminders and the prompt, then its system-role turn."""
    return [
        {"role": "user", "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": prompt}]},
        {
            "role": "system",
            "content": f"# Environment\n - Primary working directory: {ROOT}\n - Platform: linux",
        },
    ]


def cc_ask(client: anthropic.Anthropic, messages: list[dict[str, Any]]) -> anthropic.types.Message:
    return client.messages.create(
        model=CC_MODEL, max_tokens=16000, system=[{"type": "text", "text": "You are a Claude agent."}],
        tools=CC_TOOLS, thinking={"type": "adaptive"}, messages=messages,
    )  # fmt: skip


def finish_turn(client: anthropic.Anthropic, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    while True:
        reply = cc_ask(client, messages)
        messages = [
            *messages,
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
        ]
        if reply.stop_reason != "tool_use":
            return messages
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
            for b in reply.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})


def test_claude_code_session_follows_the_scenario_with_its_own_tools(client: anthropic.Anthropic) -> None:
    first = cc_ask(client, cc_first())
    assert [b.type for b in first.content] == [
        "thinking",
        "text",
        "tool_use",
        "tool_use",
    ]  # it asks for thinking
    read, grep = first.content[2], first.content[3]
    assert read.name == "Read" and read.input == {
        "file_path": f"{ROOT}/src/pager.py"
    }  # root from its own line
    assert grep.name == "Grep" and grep.input == {"pattern": "def page", "output_mode": "content"}
    messages = finish_turn(client, cc_first())
    assert messages[-1]["content"][0]["text"].startswith("The slice end")
    suggestion = cc_ask(client, [*messages, {"role": "user", "content": CC_SUGGEST}])
    assert [b.text for b in suggestion.content if b.type == "text"] == ["fix it and run the tests"]
    # Turn 2, reached through the suggestion; the Bash step gets Claude Code's `timeout`, not `timeout_ms`.
    messages = finish_turn(client, [*messages, {"role": "user", "content": "fix it and run the tests"}])
    bash = [b for m in messages if m["role"] == "assistant" for b in m["content"] if b.get("name") == "Bash"]
    assert bash and bash[0]["input"] == {"command": "python -m pytest -q", "description": "Run the tests"}
    assert messages[-1]["content"][0]["text"] == "Fixed and the tests pass."


def test_injected_blocks_are_not_the_prompt_and_plain_requests_still_fall_back(
    client: anthropic.Anthropic,
) -> None:
    only_reminder = [{"role": "user", "content": [{"type": "text", "text": REMINDER}]}]
    reply = cc_ask(client, [*only_reminder, {"role": "assistant", "content": "noted"}, *cc_first()])
    assert reply.content[-1].type == "tool_use", "a user message holding only injected text is not a prompt"
    other = cc_ask(client, cc_first("write me a poem"))
    assert other.content[-1].text.startswith(FALLBACK_PREFIX)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "is_request"),
    [
        (SUGGESTION_INSTRUCTION, True),
        (CC_SUGGEST, True),
        ("Predict the next thing the user will type next, in at most 12 words.", True),
        ("Suggest what they might ask next in this session.", True),
        ("suggest a better name for this function", False),
        ("what should I type next to run the tests?", False),
    ],
)
def test_suggestion_requests_are_recognised_by_content(text: str, is_request: bool) -> None:
    body = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                         {"role": "user", "content": text}]}  # fmt: skip
    assert read_conversation(body).suggestion_mode is is_request


def test_suggestion_patterns_are_configurable() -> None:
    body = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                         {"role": "user", "content": "<<NEXT-PROMPT>>"}]}  # fmt: skip
    assert not read_conversation(body).suggestion_mode
    assert read_conversation(
        body, ClientConventions(suggestion_patterns=[r"^<<NEXT-PROMPT>>"])
    ).suggestion_mode
    with pytest.raises(ValueError, match="suggestion_patterns: invalid regular expression"):
        ClientConventions(suggestion_patterns=["[unclosed"])


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("system", "Working directory: /srv/app\n"),
        ("system", "<env>\nWorking directory: /srv/app\nPlatform: linux\n</env>"),
        ("system-message", " - Primary working directory: /srv/app\n - Is a git repository: true"),
        ("user", "<environment_context>\n  <cwd>/srv/app</cwd>\n</environment_context>"),
    ],
)
def test_the_root_comes_from_whichever_form_the_client_writes(where: str, text: str) -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    if where == "system":
        body["system"] = text
    elif where == "system-message":
        body["messages"].append({"role": "system", "content": text})
    else:
        body["messages"][0]["content"] = [{"type": "text", "text": text}, {"type": "text", "text": "hi"}]
    conv = read_conversation(body)
    assert conv.root == "/srv/app" and conv.prompts == ("hi",)


def test_prompts_match_across_dates_and_checkouts() -> None:
    a = normalize_prompt(
        "summarise commits since 2026-11-20 in /home/alice/shop/src/cart.py", "/home/alice/shop"
    )
    b = normalize_prompt("summarise  commits since Nov 3, 2027 in /tmp/x/src/cart.py", "/tmp/x")
    assert a == b == "summarise commits since {date} in {path}/cart.py"
    assert normalize_prompt("look at {root}/README.md", None) == normalize_prompt(
        "look at /w/README.md", "/w"
    )
    assert (
        normalize_prompt("see https://example.com/a/b and a/b 1/2", None)
        == "see https://example.com/a/b and a/b 1/2"
    )
    assert normalize_prompt("fix it", "/w") != normalize_prompt("fix it now", "/w")


def test_a_scenario_prompt_with_a_date_and_path_matches_on_another_day(tmp_path: Path) -> None:
    scenario = tmp_path / "dated.yaml"
    scenario.write_text(
        "name: dated\nturns:\n  - prompt: 'what changed since 2026-01-05 in {root}/CHANGELOG.md?'\n"
        "    steps:\n      - text: 'Nothing since then.'\n"
    )
    with (
        SimServer([scenario], time_scale=0.001) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key="k", max_retries=0) as c,
    ):
        reply = c.messages.create(
            model=CC_MODEL, max_tokens=100, messages=[
                {"role": "user", "content": "what changed since 2026-11-26 in /srv/other/CHANGELOG.md?"},
                {"role": "system", "content": "Working directory: /srv/other"},
            ],
        )  # fmt: skip
    assert reply.content[0].text == "Nothing since then."  # type: ignore[union-attr]


# -- intents ---------------------------------------------------------------------------------------------------
def tool(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "input_schema": {"type": "object", "properties": props, "required": required,
                                           "additionalProperties": False}}  # fmt: skip


S = {"type": "string"}
GEMINI_LIKE = [
    tool(
        "read_file",
        {"absolute_path": S, "offset": {"type": "number"}, "limit": {"type": "number"}},
        ["absolute_path"],
    ),
    tool(
        "replace",
        {"file_path": S, "old_string": S, "new_string": S},
        ["file_path", "old_string", "new_string"],
    ),
    tool("run_shell_command", {"command": S, "description": S}, ["command"]),
]


def test_calls_go_out_as_scripted_when_the_client_has_the_tool() -> None:
    inp = {"file_path": "/w/a.py", "offset": 3}
    assert render("Read", inp, CC_TOOLS) == ("Read", inp)
    assert render("Read", inp, None) == ("Read", inp)  # no tools sent: nothing to adapt to


def test_calls_are_adapted_to_the_clients_field_names_and_units() -> None:
    assert render("Bash", {"command": "ls", "timeout_ms": 5000}, CC_TOOLS) == (
        "Bash",
        {"command": "ls", "timeout": 5000},
    )
    seconds = [
        tool(
            "shell", {"cmd": S, "timeout": {"type": "integer", "description": "Timeout in seconds"}}, ["cmd"]
        )
    ]
    assert render("Bash", {"command": "ls", "timeout_ms": 5000}, seconds) == (
        "shell",
        {"cmd": "ls", "timeout": 5},
    )
    assert render("Read", {"file_path": "/w/a.py", "limit": 4}, GEMINI_LIKE) == (
        "read_file", {"absolute_path": "/w/a.py", "limit": 4})  # fmt: skip
    assert render("Grep", {"pattern": "x", "case_insensitive": True}, CC_TOOLS) == (
        "Grep",
        {"pattern": "x", "-i": True},
    )
    editor = [{"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}]
    assert render("Read", {"file_path": "/w/a", "offset": 2, "limit": 3}, editor) == (
        "str_replace_based_edit_tool", {"command": "view", "path": "/w/a", "view_range": [2, 4]})  # fmt: skip


def test_without_a_suitable_tool_the_intent_runs_through_the_shell() -> None:
    name, inp = render("Edit", {"file_path": "/w/a", "old_string": "x", "new_string": "y", "replace_all": True},
                       GEMINI_LIKE)  # fmt: skip
    assert name == "run_shell_command" and inp["command"].startswith("python3 -c ")
    assert (
        render("Grep", {"pattern": "def x", "path": "/w"}, GEMINI_LIKE)[1]["command"]
        == "grep -rE -l -e 'def x' /w"
    )
    with pytest.raises(RenderError, match=r"offers no tool to grep .* tools offered: read_file"):
        render("Grep", {"pattern": "x"}, GEMINI_LIKE[:1])


def test_shell_forms_of_the_intents_do_what_the_tools_do(tmp_path: Path) -> None:
    def sh(intent: str, **inp: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", shell_command(intent, inp)], cwd=tmp_path, capture_output=True, text=True
        )

    f = str(tmp_path / "d" / "a.txt")
    assert sh("write", file_path=f, content="one 'x'\ntwo x\nthree\n").returncode == 0
    assert sh("read", file_path=f, offset=2, limit=1).stdout == "two x\n"
    assert sh("edit", file_path=f, old_string="x", new_string="y").returncode == 1  # twice: must be unique
    assert sh("edit", file_path=f, old_string="two x", new_string="2 $HOME").returncode == 0
    assert sh("edit", file_path=f, old_string="three", new_string="3", replace_all=True).returncode == 0
    assert Path(f).read_text() == "one 'x'\n2 $HOME\n3\n"
    assert sh("grep", pattern="^2", path=str(tmp_path), output_mode="content").stdout == f"{f}:2:2 $HOME\n"
    assert sh("glob", pattern="**/*.txt", path=str(tmp_path)).stdout == f"{f}\n"


@pytest.mark.parametrize(
    ("value", "schema", "bad"),
    [
        ({"a": 1}, {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}}, None),
        (
            {"a": True},
            {"type": "object", "properties": {"a": {"type": "integer"}}},
            "input.a: True is not of type",
        ),
        ({}, {"type": "object", "required": ["a"]}, "input: 'a' is a required property"),
        ({"b": 1}, {"type": "object", "additionalProperties": False}, "input: Additional properties"),
        ({"a": None}, {"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}, None),
        ({"a": "z"}, {"properties": {"a": {"enum": ["x", "y"]}}}, "input.a: 'z' is not one of"),
        (
            {"a": [1, "x"]},
            {"properties": {"a": {"items": {"type": "integer"}}}},
            "input.a[1]: 'x' is not of type",
        ),
        (
            {"a": 0},
            {"properties": {"a": {"type": "integer", "exclusiveMinimum": 0}}},
            "less than or equal to",
        ),
        # $ref and $defs are checked (the hand-written subset this replaced ignored them).
        (
            {"todos": [{"content": "x", "status": "finished"}]},
            {
                "type": "object",
                "properties": {"todos": {"type": "array", "items": {"$ref": "#/$defs/todo"}}},
                "$defs": {
                    "todo": {
                        "type": "object",
                        "properties": {"status": {"enum": ["pending", "in_progress", "completed"]}},
                    }
                },
            },
            "input.todos[0].status: 'finished' is not one of",
        ),
        # Draft 7 (Claude Code's tool schemas say so) uses "definitions".
        (
            {"n": "1"},
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "properties": {"n": {"$ref": "#/definitions/num"}},
                "definitions": {"num": {"type": "number"}},
            },
            "input.n: '1' is not of type 'number'",
        ),
        ({"a": 1}, {"properties": {"a": {"$ref": "#/$defs/missing"}}}, "does not resolve"),
        ({"a": 1}, {"type": "objekt"}, "not a valid schema"),
    ],
)
def test_schema_checks(value: Any, schema: dict[str, Any], bad: str | None) -> None:
    found = problem(value, schema)
    assert found is None if bad is None else (found is not None and bad in found), found


def test_tiny_scenario_fixture_is_what_these_tests_assume() -> None:
    assert "why does page 2 repeat an item?" in TINY.read_text()


def test_every_tool_field_has_a_place_in_the_client_adapters() -> None:
    """A field added to one of our tools' Input models must be added to intents.FIELDS too, or calls adapted
    to another client's tools would silently drop it."""
    from speculate.sim.intents import FIELDS
    from speculate.tools import default_tools

    inputs = {t.name: t.Input for t in default_tools()}
    tool_of = {
        "read": "Read",
        "write": "Write",
        "edit": "Edit",
        "glob": "Glob",
        "grep": "Grep",
        "run": "Bash",
    }
    assert set(FIELDS) == set(tool_of)
    for intent, tool in tool_of.items():
        assert {f for f, _, _ in FIELDS[intent]} == set(inputs[tool].model_fields), intent


def test_text_tool_calling_is_read_from_the_request_for_any_scenario(client: anthropic.Anthropic) -> None:
    """The claude-cli backend's requests (no API tools, a <tools> block, <tool_use>/<tool_result> text) get
    <tool_use> text from a scenario written for API tool calls (tiny.yaml has no ``tool_calls: text``)."""
    from speculate.models.text_tools import extract, render, tools_reminder
    from speculate.tools import default_tools

    tools = default_tools()
    validators = {t.name: t.Input for t in tools}
    system = f"Working directory: {ROOT}"

    def ask(messages: list[dict[str, Any]], first: bool) -> str:
        text = render(messages)
        prompt = f"{tools_reminder([t.schema() for t in tools])}\n{text}" if first else text
        reply = client.messages.create(
            model=CC_MODEL,
            max_tokens=1000,
            system=system,
            tools=[],
            messages=[{"role": "user", "content": prompt}],
        )
        assert [b.type for b in reply.content] == ["text"]  # tool calls travel as text, thinking dropped
        return reply.content[0].text  # type: ignore[union-attr]

    conversation: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": FIRST}]}]
    got = extract(ask(conversation, first=True), validators)
    assert [(u["name"], u["input"]) for u in got.uses] == [
        ("Read", {"file_path": f"{ROOT}/src/pager.py"}),
        ("Grep", {"pattern": "def page", "output_mode": "content"}),
    ]
    assert got.invalid == [] and got.text == "Let me look at the pager."
    conversation += [
        {"role": "assistant", "content": [{"type": "text", "text": got.text}, *got.uses]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": u["id"], "content": "ok"} for u in got.uses],
        },
    ]
    # The whole conversation in one prompt (a fresh CLI session): the tool results are not a prompt.
    assert ask(conversation, first=True).startswith("The slice end is one past the page size")


@pytest.mark.parametrize(
    "wording",
    [
        "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\n- Do NOT use Read, Bash, Grep, Glob, Edit, Write, or "
        "ANY other tool.\n- Your entire response must be plain text: an <analysis> block followed by a <summary> block."
        "\n\nYour task is to create a detailed summary of the conversation so far, paying close attention "
        "to the user's explicit requests and your previous actions.",  # Claude Code 2.1.332's /compact
        "Your task is to create a detailed summary of the conversation so far.",
    ],
)
def test_claude_codes_compact_request_is_a_summary_request(client: anthropic.Anthropic, wording: str) -> None:
    messages = [
        *cc_first(),
        {"role": "assistant", "content": "It is the slice."},
        {"role": "user", "content": [{"type": "text", "text": wording}]},
    ]
    reply = cc_ask(client, messages)
    text = "".join(b.text for b in reply.content if b.type == "text")  # type: ignore[union-attr]
    assert not text.startswith(FALLBACK_PREFIX) and FIRST in text
    assert ("<summary>" in text) == ("<summary>" in wording)  # the blocks Claude Code asks for
