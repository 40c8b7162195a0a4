"""A study in line mode (`speculate repl --plain --study DIR` on a pipe): the consent is asked on the same
input, `/accept` counts as taking the ghost text, a typed line has no key times (line mode sees only the
line), and without --study-reveal the exit names where the turns went but not their arms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from speculate.repl.demo import find_scenario, prepare_project
from speculate.sim.scenario_yaml import load_scenario
from speculate.study.arms import sequence
from tests.repl.test_tmux import P1, P2
from tests.repl.test_untrusted_output import REPO, LineRepl

P3 = "run the CLI to check page 2"
SEED = 12  # speculative, suggest, speculative (blocked draws since #36; seed 4 gave this before)


class StudyLines(LineRepl):
    def __init__(self, tmp: Path, project: Path, study: Path) -> None:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "SPECULATE_HISTORY": str(tmp / "h")}
        self.p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "speculate.cli",
                "repl",
                str(project),
                "--scenario",
                "fix-pagination",
                "--time-scale",
                "0.05",
                "--plain",
                "--study",
                str(study),
                "--study-seed",
                str(SEED),
            ],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.out = b""
        self.seen = 0

    def suggestion(self, text: str) -> None:
        """Read until ``text`` is suggested, answering yes to the questions the turn asks on the way."""
        while "[y/n/always]" in self.expect(f"[suggestion] {text}\n", "? [y/n/always] ", timeout=60):
            self.send("y")


@pytest.mark.slow
def test_a_study_in_line_mode(tmp_path: Path) -> None:
    project = prepare_project(load_scenario(find_scenario("fix-pagination")), tmp_path / "proj")
    study = tmp_path / "study"
    r = StudyLines(tmp_path, project, study)
    try:
        assert "Nothing leaves this machine" in r.expect("Type yes to agree: ")
        r.send("yes")
        r.suggestion(P1)
        r.send("/accept")  # 1: the demo's prompt, taken by /accept
        r.suggestion(P2)
        r.send(P2)  # 2: the model's suggestion typed out exactly
        r.suggestion(P3)
        r.send("explain page_bounds first")  # 3: ignored
        r.send("/diff last")  # an accepted change would tell turn 1's or 2's arm
        assert "/diff is hidden during a study" in r.expect("each turn's arm")
        r.send("/study")
        listing = r.expect("is over)")
        assert "study: 3 turns recorded in" in listing
        out = r.finish()
    finally:
        if r.p.poll() is None:
            r.p.kill()
            r.p.communicate()
    exit_line = out.split("is over)")[-1]
    assert (
        "study: 3 turns recorded in" in exit_line and "--study-reveal (or /study before leaving)" in exit_line
    )
    files = sorted((study / "sessions").glob("*.jsonl"))
    recs = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert recs[0]["frontend"] == "plain" and recs[-1]["kind"] == "end"
    turns = [x for x in recs if x["kind"] == "turn"]
    assert [t["arm"] for t in turns] == sequence(SEED, 3)
    assert [t["taken"] for t in turns] == ["taken", "taken", "ignored"]
    assert [t["took_ghost"] for t in turns] == [True, False, False]
    assert [t["suggestion"] for t in turns] == [P1, P2, P3]
    # /accept is the key that takes the ghost text, at the moment it is sent; a typed line has no key times.
    assert turns[0]["think_s"] is not None and turns[0]["think_s"] >= 0
    assert turns[0]["typing_s"] == pytest.approx(0.0, abs=0.05)
    for t in turns[1:]:
        assert t["first_key_s"] is None and t["think_s"] is None and t["typing_s"] is None, t
        assert t["shown_s"] is not None and 0 <= t["shown_s"] <= t["submit_s"]
    assert turns[1]["arm"] == "suggest" and not turns[1]["accepted"] and turns[1]["speculation"] is None
