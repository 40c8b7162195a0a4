"""Checked tool results: a turn's tool results against its steps' expectations."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.expect import check_turn, exit_code
from speculate.sim import ScenarioError, load_scenario, parse_scenario

SCN = """\
name: exp
turns:
  - prompt: "run the tests"
    steps:
      - tools:
          - Bash: {command: "python -m pytest -q"}
        expect: {exit_code: 0, matches: "\\\\d+ passed"}
      - text: "All passed."
    suggestions:
      - {text: "commit it", weight: 1}
      - text: "push it"
        steps: [{text: "pushed"}]
  - prompt: "commit it"
    steps:
      - text: "ok"
"""


def turn_messages(result: str, *, is_error: bool = False) -> list[dict]:
    return [
        {"role": "user", "content": "run the tests"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": result, "is_error": is_error}
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "All passed."}]},
    ]


def test_met_expectations_give_no_problems() -> None:
    steps = parse_scenario(SCN).turns[0].steps
    assert check_turn(steps, turn_messages("..\n2 passed in 0.01s")) == []


def test_a_missing_interpreter_is_an_unmet_expectation() -> None:
    steps = parse_scenario(SCN).turns[0].steps
    msgs = turn_messages("bash: line 1: python: command not found\nExit code 127", is_error=True)
    problems = check_turn(steps, msgs)
    assert problems[0] == "step 1 tool 1: exit code 127, expected 0"
    assert "does not match" in problems[1] and "Exit code 127" in problems[1]  # with the last line
    assert exit_code({"content": "boom", "is_error": True}) == 1


@pytest.mark.parametrize(
    ("expect", "reason"),
    [
        ("{exit_code: zero}", "exit_code must be an integer"),
        ("{matches: '('}", "not a valid regex"),
        ("{stdout: x}", "unknown key 'stdout'"),
    ],
)
def test_bad_expectations_name_file_and_line(tmp_path: Path, expect: str, reason: str) -> None:
    p = tmp_path / "e.yaml"
    p.write_text(SCN.replace('{exit_code: 0, matches: "\\\\d+ passed"}', expect))
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    assert info.value.line == 7 and reason in info.value.reason, str(info.value)
