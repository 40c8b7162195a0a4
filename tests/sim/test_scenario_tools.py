"""Scenario tool steps are checked by the tools' own pydantic Input models: errors name the tool, the field
and the line; a field the model requires is required with no other edit (there is no second schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from speculate.sim import ScenarioError, load_scenario, parse_scenario
from speculate.sim.scenario import default_scenario_paths
from speculate.sim.scenario_tools import INTENTS, intent_fields, tool_inputs
from speculate.tools import default_tools, tools_by_name
from speculate.tools.read import Read, ReadInput

HEAD = "name: x\nturns:\n  - prompt: 'a'\n    steps:\n      - tools:\n"  # the tool list opens on line 6


def _steps(tool_yaml: str) -> str:
    """``tool_yaml``: the lines of one tool call, indented under ``tools:``, starting on line 6."""
    return HEAD + tool_yaml + "      - text: b\n"


def _sample(name: str, field: str) -> Any:
    """A valid value for a required field, by its annotation (a new type fails here, loudly)."""
    annotation = tool_inputs()[name].model_fields[field].annotation
    return {str: "x", int: 1, bool: True}[annotation]  # type: ignore[index]


def _call(name: str, inp: dict[str, Any]) -> str:
    fields = ", ".join(
        f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {str(v).lower()}" for k, v in inp.items()
    )
    return _steps(f"          - {name}: {{{fields}}}\n")


@pytest.mark.parametrize(
    ("tool_yaml", "line", "reason"),
    [
        (
            "          - Grep:\n              pattern: x\n              output_mode: lines\n",
            8,
            "tools[0] Grep.output_mode: Input should be 'content', 'files_with_matches' or 'count', got 'lines'",
        ),
        ("          - Edit:\n              file_path: a\n              old_string: b\n              new_string: c\n"
         "              replace_all: 1\n", 10, "Edit.replace_all: Input should be a valid boolean, got 1"),
        ("          - Read:\n              file_path: a\n              offset: true\n", 8,
         "Read.offset: Input should be a valid integer, got True"),
        ("          - Read:\n              file_path: a\n              limit: '5'\n", 8,
         "Read.limit: Input should be a valid integer, got '5'"),  # strict: no "5" -> 5
        ("          - Read:\n              file_path: a\n              offset: 0\n", 8,
         "Read.offset: Input should be greater than or equal to 1"),
        ("          - Bash:\n              command: 5\n", 7, "Bash.command: Input should be a valid string"),
        ("          - Bash:\n              command: ''\n", 7, "Bash.command: String should have at least 1"),
        ("          - Write:\n              file_path: a\n", 7, "Write input is missing required field 'content'"),
        ("          - Bash:\n              command: ls\n              timeout: 5\n", 8,
         "unknown key 'timeout' in turns[0].steps[0].tools[0] Bash input (allowed: command, timeout_ms, description)"),
        ("          - Glob:\n              pattern: '*'\n              path: null\n", 8,
         "Glob.path is null: leave the field out"),
        ("          - search:\n              pattern: x\n              mode: lines\n", 8,
         "search.mode: Input should be 'content'"),
        ("          - read:\n              offset: 2\n", 7, "read input is missing required field 'path'"),
        ("          - edit: {path: a, old: b, new: c, all: 'yes'}\n", 6, "edit.all: Input should be a valid boolean"),
        ("          - run:\n              command: ls\n              timeout_s: 700\n", 8,
         "run.timeout_s (in ms): Input should be less than or equal to 600000, got 700000"),
        ("          - run: {command: ls, timeout_s: -1}\n", 6, "run.timeout_s must be a positive number"),
        ("          - read: {file_path: a}\n", 6, "unknown key 'file_path' in turns[0].steps[0].tools[0] read"),
    ],
)  # fmt: skip
def test_wrong_tool_input_names_the_tool_the_field_and_its_line(
    tmp_path: Path, tool_yaml: str, line: int, reason: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(_steps(tool_yaml))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert (info.value.line, str(info.value)) == (line, f"{path}:{line}: {info.value.reason}")
    assert reason in info.value.reason


def test_inputs_go_out_as_written_with_intents_renamed_and_seconds_in_ms() -> None:
    s = parse_scenario(
        _steps("          - Grep: {pattern: x}\n          - run: {command: ls, timeout_s: 1.5}\n")
    )
    calls = s.turns[0].steps[0].tools
    assert [(c.name, c.input) for c in calls] == [
        ("Grep", {"pattern": "x"}),  # no defaults filled in
        ("Bash", {"command": "ls", "timeout_ms": 1500}),
    ]


@pytest.mark.parametrize("tool", [t.name for t in default_tools()])
def test_every_field_the_tool_requires_is_required_by_the_scenario_validator(tool: str) -> None:
    model = tool_inputs()[tool]
    required = {f: _sample(tool, f) for f, info in model.model_fields.items() if info.is_required()}
    assert required, f"{tool} requires nothing?"
    assert parse_scenario(_call(tool, required)).turns[0].steps[0].tools[0].input == required
    for field in required:
        with pytest.raises(ScenarioError, match=f"{tool} input is missing required field '{field}'"):
            parse_scenario(_call(tool, {k: v for k, v in required.items() if k != field}))


def test_a_field_added_to_a_tool_input_is_checked_with_no_other_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    class WiderReadInput(ReadInput):
        encoding: str = Field(min_length=1)

    monkeypatch.setattr(Read, "Input", WiderReadInput)
    with pytest.raises(ScenarioError, match="Read input is missing required field 'encoding'"):
        parse_scenario(_call("Read", {"file_path": "a"}))
    with pytest.raises(ScenarioError, match=r"read\.encoding: String should have at least 1 character"):
        parse_scenario(_call("read", {"path": "a", "encoding": ""}))  # the intent has the field too
    assert parse_scenario(_call("read", {"path": "a", "encoding": "utf-8"})).turns[0].steps[0].tools[
        0
    ].input == {
        "file_path": "a",
        "encoding": "utf-8",
    }


@pytest.mark.parametrize("key", list(INTENTS))
def test_intents_rename_real_fields_and_offer_every_field(key: str) -> None:
    name, renames = INTENTS[key]
    model: type[BaseModel] = tool_inputs()[name]
    assert set(renames.values()) <= set(model.model_fields), "an intent renames a field its tool lacks"
    assert sorted(intent_fields(key).values()) == sorted(model.model_fields)


def test_bundled_tool_calls_are_what_the_agents_tools_accept() -> None:
    # The simulator serves these inputs as tool_use blocks, and the agent parses them with Tool.parse.
    tools = tools_by_name()
    calls = [
        call
        for path in default_scenario_paths()
        for turn in load_scenario(path).turns
        for option in turn.options
        for step in (*turn.steps, *(option.steps or ()))
        for call in step.tools
        if call.name in tools
    ]
    assert calls
    for call in calls:
        tools[call.name].parse(call.input)
