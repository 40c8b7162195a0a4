"""``speculate bench check``: format errors with file:line, and a replay that reports unmet expectations;
``speculate sim check``: the same format errors, and no replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.cli import main

SCN = """\
name: check-me
files:
  a.txt: "alpha\\n"
turns:
  - prompt: "show a"
    steps:
      - tools:
          - Bash: {command: "cat a.txt"}
        expect: {exit_code: 0, contains: "WANT"}
      - text: "Shown."
"""


def test_replay_reports_an_unmet_expectation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(SCN)
    assert main(["bench", "check", str(p)]) == 1
    out = capsys.readouterr().out
    assert "turn 1 'show a': unmet expectation: step 1 tool 1: output lacks 'WANT'" in out
    p.write_text(SCN.replace("WANT", "alpha"))
    assert main(["bench", "check", str(p)]) == 0
    assert "all turns replayed as scripted" in capsys.readouterr().out


def test_a_block_scalar_indentation_error_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nturns:\n  - prompt: a\n    steps:\n      - text: |\n          one\n        two\n")
    for argv in (["sim", "check", str(p)], ["bench", "check", "--no-replay", str(p)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{p}:" in err and "YAML syntax error" in err and "text block opened on line 5" in err, argv


def test_sim_check_validates_without_replaying(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The simulator's check reads the file as the simulator would and names the replay; an unmet
    expectation (which only a replay finds) does not fail it."""
    p = tmp_path / "s.yaml"
    p.write_text(SCN)
    assert main(["sim", "check", str(p)]) == 0
    out = capsys.readouterr().out
    assert f"{p}: ok: 'check-me', 1 turns, 1 expectation(s)" in out
    assert f"to replay: speculate bench check {p}" in out and "replayed" not in out


MISS = """\
name: check-my-miss
files:
  a.txt: "alpha\\n"
turns:
  - prompt: "show a"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a.txt holds alpha."
    suggestions:
      - {text: "show b", weight: 1}
      - text: "rewrite a"
        weight: 0
        steps:
          - tools:
              - Write: {file_path: "{root}/a.txt", content: "beta\\n"}
          - tools:
              - Bash: {command: "cat a.txt"}
            expect: {exit_code: 0, contains: "WANT"}
          - text: "Rewritten."
  - prompt: "show b"
    steps:
      - text: "There is no b."
"""


@pytest.mark.slow
def test_misses_forks_each_wrong_suggestion_and_checks_its_tool_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "miss.yaml"
    p.write_text(MISS)
    assert main(["bench", "check", str(p)]) == 0  # the main turns are fine: the candidate is not replayed
    capsys.readouterr()
    assert main(["bench", "check", "--misses", str(p)]) == 1  # forked, in the sandbox, and checked
    out = capsys.readouterr().out
    assert "miss before turn 2 ('rewrite a'): miss fork: step 2 tool 1: output lacks 'WANT'" in out
    p.write_text(MISS.replace("WANT", "beta"))
    assert main(["bench", "check", "--misses", str(p)]) == 0
    assert "miss before turn 2 ('rewrite a'): ok, 1 tool result(s) checked" in capsys.readouterr().out
