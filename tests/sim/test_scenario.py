"""Scenario files: a valid one loads; each malformed one is rejected with its file, line and reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.sim import ScenarioError, SimServer, load_scenario, parse_scenario

from .conftest import TINY

VALID_TURN = """\
  - prompt: "hello"
    steps:
      - text: "hi"
"""


def test_fixture_loads_with_turns_steps_and_tools() -> None:
    s = load_scenario(TINY)
    assert s.name == "tiny-fix" and len(s.turns) == 2
    assert [t.name for t in s.turns[0].steps[0].tools] == ["Read", "Grep"]
    assert s.turns[0].suggestion == s.turns[1].prompt and s.turns[0].suggestion_steps is None
    assert s.turns[1].suggestion_steps is not None and s.turns[1].suggestion_steps[-1].text == "Committed."


def test_materialize_writes_the_files(tmp_path: Path) -> None:
    root = load_scenario(TINY).materialize(tmp_path / "proj")
    assert "size + 1]" in (root / "src" / "pager.py").read_text()


def test_workspace_resolves_under_workspaces(tmp_path: Path) -> None:
    (tmp_path / "workspaces" / "shop" / "src").mkdir(parents=True)
    (tmp_path / "workspaces" / "shop" / "src" / "a.py").write_text("A = 1\n")
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkspace: shop\nfiles: {src/b.py: 'B = 2'}\nturns:\n" + VALID_TURN)
    root = load_scenario(path).materialize(tmp_path / "out")
    assert (root / "src" / "a.py").read_text() == "A = 1\n" and (root / "src" / "b.py").read_text() == "B = 2"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("name: x\nturns:\n  - prompt: 'a'\n    steps: [\n", 5, "YAML syntax error"),
        ("", 1, "file is empty"),
        ("turns:\n" + VALID_TURN, 1, "missing required key 'name'"),
        ("name: x\ntrns: []\n", 2, "unknown key 'trns'"),
        (
            "name: x\nturns:\n  - prompt: 'a'\n    steps:\n      - text: 'x'\n        tools:\n          - Raed: {file_path: a}\n",
            7,
            "unknown tool or intent 'Raed'",
        ),
        (
            "name: x\nturns:\n  - prompt: 'a'\n    steps:\n      - tools:\n          - Read: {path: a}\n      - text: b\n",
            6,
            "unknown key 'path'",
        ),
        (
            "name: x\nturns:\n  - prompt: 'a'\n    steps:\n      - tools:\n          - Read: {offset: 3}\n      - text: b\n",
            6,
            "missing required field 'file_path'",
        ),
        (
            "name: x\nturns:\n  - prompt: 'a'\n    steps:\n      - tools:\n          - Read: {file_path: a, limit: 'ten'}\n      - text: b\n",
            6,
            "Read.limit: Input should be a valid integer",
        ),
        (
            "name: x\nturns:\n  - prompt: 'a'\n    steps:\n      - tools:\n          - Bash: {command: ls}\n",
            5,
            "last step but calls tools",
        ),
        (
            "name: x\nturns:\n  - prompt: 'a'\n    steps:\n      - text: a\n      - text: b\n",
            5,
            "turn would end before",
        ),
        ("name: x\nturns:\n" + VALID_TURN + "    suggestion: 'go on'\n", 3, "suggestion_steps is required"),
        (
            "name: x\nturns:\n" + VALID_TURN + "    suggestion_steps:\n      - text: a\n",
            6,
            "suggestion_steps is unused",
        ),
        ("name: x\nworkspace: nowhere\nturns:\n" + VALID_TURN, 2, "workspace 'nowhere' not found"),
        ("name: x\nfiles: {../escape.py: 'x'}\nturns:\n" + VALID_TURN, 2, "relative path inside the project"),
        (
            "name: x\nturns:\n  - prompt: ''\n    steps:\n      - text: a\n",
            3,
            "prompt must be a non-empty string",
        ),
    ],
)
def test_malformed_file_is_rejected_with_file_line_and_reason(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.source == str(path)
    assert info.value.line == line, str(info.value)
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_duplicate_scenario_names_are_rejected() -> None:
    s = parse_scenario("name: dup\nturns:\n" + VALID_TURN, source="a.yaml")
    with pytest.raises(ScenarioError, match=r"also used by a\.yaml"):
        SimServer([s, s])


def test_default_scenarios_load_when_present() -> None:
    # bench/scenarios/*.yaml are the defaults; whatever is there must load (and an empty set is fine).
    with SimServer(time_scale=0.001) as sim:
        names = [s.name for s in sim.scenarios]
    assert len(names) == len(set(names))
