"""The simulated user's decision rule (issue #36, item 5): ``exact``, ``normalized`` and ``outcome``, a named
option with a stated default, and a bench run where only ``outcome`` takes a paraphrase whose fork does the
intent's work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import bench_main
from bench.run_options import build_config, build_parser
from bench.user import ACCEPT_RULES, DEFAULT_ACCEPT_RULE, accepts, chosen_rank, normalize_text
from speculate.sim.scenario import Candidate, Step, ToolCall, Turn, default_scenario_dir

STEPS = (Step(tools=(ToolCall("Read", {"file_path": "{root}/README.md"}),)), Step(text="It prints the ids."))
INTENT = Turn(prompt="Make it print the list of valid ids.", steps=STEPS)


def test_exact_and_normalized() -> None:
    s = "make it print the list of valid ids"
    assert not accepts("exact", s, INTENT) and accepts("exact", INTENT.prompt, INTENT)
    assert accepts("normalized", s, INTENT) and accepts(
        "normalized", "  MAKE it print the list of valid ids!", INTENT
    )
    assert not accepts("normalized", "make it print the list of ids", INTENT)
    assert normalize_text("Fix it.\n") == "fix it"


def test_outcome_is_the_same_work_not_the_same_words() -> None:
    para = Candidate("print the valid ids", 1.0, STEPS)  # other words, the intent's steps: same tree, answer
    assert accepts("outcome", para.text or "", INTENT, candidate=para)
    assert not accepts("exact", para.text or "", INTENT) and not accepts(
        "normalized", para.text or "", INTENT
    )
    other = Candidate("print the invalid ids", 1.0, (Step(text="Printed the invalid ones."),))
    assert not accepts("outcome", other.text or "", INTENT, candidate=other)
    # The intent's words with other whitespace: the simulator reads it as the intent's prompt, runs its steps.
    assert accepts("outcome", "Make it print  the list of valid ids.", INTENT)
    # Only the case differs, and no steps of its own: the simulator would not run the intent's steps.
    assert not accepts("outcome", "make it print the list of valid ids.", INTENT)
    # Top-K: the first shown candidate the rule takes.
    assert (
        chosen_rank("outcome", ["print the invalid ids", "print the valid ids"], INTENT, (other, para)) == 1
    )
    assert (
        chosen_rank("exact", ["print the invalid ids", "print the valid ids"], INTENT, (other, para)) is None
    )


def test_the_rule_is_an_option_with_a_stated_default() -> None:
    assert ACCEPT_RULES == ("exact", "normalized", "outcome") and DEFAULT_ACCEPT_RULE == "outcome"
    cfg = build_config(build_parser().parse_args(["--quick"]))
    assert cfg.accept_rule == "outcome"
    assert (
        build_config(build_parser().parse_args(["--quick", "--accept-rule", "exact"])).accept_rule == "exact"
    )
    # A real model does not follow the simulator's scripts: outcome is refused there, normalized the default.
    with pytest.raises(ValueError, match="--accept-rule outcome reads the simulator's scripts"):
        build_config(
            build_parser().parse_args(["--quick", "--model", "anthropic", "--accept-rule", "outcome"])
        )
    assert (
        build_config(build_parser().parse_args(["--quick", "--model", "anthropic"])).accept_rule
        == "normalized"
    )


SCENARIO = """\
name: paraphrase
description: the suggestion after turn 1 says turn 2's prompt in other words, with turn 2's steps
workspace: sample_project
turns:
  - prompt: "what is in the readme?"
    steps:
      - tools:
          - Read: {file_path: "{root}/README.md"}
      - text: "The README describes the shop."
    suggestions:
      - text: "Now list the source files."
        weight: 1
        steps:
          - tools:
              - Glob: {pattern: "src/**/*.py"}
          - text: "Those are the source files."
  - prompt: "list the source files"
    steps:
      - tools:
          - Glob: {pattern: "src/**/*.py"}
      - text: "Those are the source files."
"""


@pytest.mark.slow
def test_only_outcome_takes_a_paraphrase_that_does_the_intents_work(tmp_path: Path, state_dir: Path) -> None:
    path = tmp_path / "paraphrase.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    (tmp_path / "workspaces").symlink_to(default_scenario_dir() / "workspaces")
    got = {}
    for rule in ("exact", "outcome"):
        out = tmp_path / rule
        argv = ["--scenario", str(path), "--reps", "1", "--time-scale", "0.05", "--think-time", "fixed:20"]
        rc = bench_main([*argv, "--user-edit-prob", "0", "--accept-rule", rule, "--out", str(out)])
        s = json.loads((out / "summary.json").read_text())
        assert rc == 0 and s["turn_errors"] == [] and s["accept_rule"] == rule
        got[rule] = s
    assert got["exact"]["accepted"] == 0
    assert got["outcome"]["accepted"] == 1  # the fork's work landed, and the turn met its checks
    assert "decision rule" not in json.dumps(
        got["exact"]["conditions"]
    )  # the rule is the run's, not a condition
