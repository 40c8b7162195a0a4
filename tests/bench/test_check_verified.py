"""``speculate bench check`` says what a replay verified: per turn, how many tool results an expectation
checked; "replay unverified" where none did (the simulator answers from the script whatever the tools
return, so such a turn "replays as scripted" even when every Read failed); ``--strict`` fails on it (#36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.cli import main

UNCHECKED = """\
name: check-unverified
files:
  a.txt: "alpha\\n"
turns:
  - prompt: "show a and b"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - tools:
          - Read: {file_path: "{root}/gone.txt"}
          - Read: {file_path: "{root}/also-gone.txt"}
      - text: "a holds alpha, b is gone."
  - prompt: "thanks"
    steps:
      - text: "You're welcome."
"""


def test_a_scenario_without_expectations_is_reported_unverified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(UNCHECKED)
    assert main(["bench", "check", str(p)]) == 0
    out = capsys.readouterr().out
    # two of the three Reads failed (no such file): not "replayed as scripted"
    assert "all turns replayed as scripted" not in out
    assert (
        "turn 1 'show a and b': replay unverified: no expectation checked its 3 tool result(s); "
        "2 unchecked tool result(s) were errors"
    ) in out
    assert "turn 2 'thanks': ok, no tool calls" in out
    assert (
        "speculate bench check: replay unverified on 1 of 2 turn(s) (tool calls no expectation checks); "
        "0 of 3 tool result(s) checked by expectations, 2 unchecked result(s) were errors"
    ) in out
    assert main(["bench", "check", "--strict", str(p)]) == 1
    assert "(--strict: failed)" in capsys.readouterr().out


def test_checked_results_are_counted_per_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(
        UNCHECKED.replace(
            '          - Read: {file_path: "{root}/a.txt"}\n',
            '          - Read: {file_path: "{root}/a.txt"}\n        expect: {exit_code: 0, contains: alpha}\n',
        ).replace(
            '          - Read: {file_path: "{root}/also-gone.txt"}\n',
            '          - Read: {file_path: "{root}/also-gone.txt"}\n        expect: {exit_code: 1}\n',
        )
    )
    assert main(["bench", "check", "--strict", str(p)]) == 0
    out = capsys.readouterr().out
    assert "turn 1 'show a and b': ok, 3 of 3 tool result(s) checked" in out
    assert "all turns replayed as scripted; 3 of 3 tool result(s) checked by expectations" in out


EACH = """\
name: check-each
files:
  a.txt: "alpha\\n"
turns:
  - prompt: "show a and b"
    steps:
      - tools:
          - Read: {file_path: "{root}/gone.txt"}
          - Read: {file_path: "{root}/a.txt"}
          - Bash: {command: "false"}
        expect: [{exit_code: 1}, {exit_code: 0, contains: alpha}, null]
      - text: "b is gone, a holds alpha."
"""


def test_an_expectation_per_tool_checks_each_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``expect`` as a list: one entry per tool, null for one left unchecked (a command on a partial tree)."""
    p = tmp_path / "s.yaml"
    p.write_text(EACH)
    assert main(["bench", "check", str(p)]) == 0
    out = capsys.readouterr().out
    assert (
        "turn 1 'show a and b': ok, 2 of 3 tool result(s) checked; 1 unchecked tool result(s) were errors"
        in out
    )
    assert "1 expectation(s)" not in out and "2 expectation(s) on tool results" in out  # sim check's count
    p.write_text(p.read_text().replace("contains: alpha", "contains: WANT"))
    assert main(["bench", "check", str(p)]) == 1
    assert "step 1 tool 2: output lacks 'WANT'" in capsys.readouterr().out
    p.write_text(p.read_text().replace(", null]", "]"))
    assert main(["bench", "check", str(p)]) == 2
    assert "expect as a list needs one entry per tool (3), got 2" in capsys.readouterr().err
