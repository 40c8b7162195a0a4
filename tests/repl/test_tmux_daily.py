"""The REPL for daily use, in a real terminal (tmux), read off the screen: a live line while a turn runs,
type-ahead kept but not sent after a cancel, permission questions with the diff and Esc for no, collapsed
tool output and /last, /diff of the last accepted change in colour, a conflicting speculation discarded
before anything of it is shown, and a cancelled acceptance that says nothing landed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speculate.repl.demo import find_scenario, prepare_project
from speculate.sim.scenario_yaml import load_scenario
from tests.repl.tmuxkit import FINISHED, P1, P2, Term, tree_hash

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
REPO = Path(__file__).resolve().parents[2]


def start(tmp_path: Path, project: Path, *, time_scale: float, extra: str = "") -> Term:
    t = Term()
    t.start(
        f"SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} -m speculate.cli repl {project} "
        f"--scenario fix-pagination --time-scale {time_scale} {extra}; echo EXIT=$?; sleep 60"
    )
    return t


def status_line(t: Term) -> str:
    lines = [ln for ln in t.screen().splitlines() if "esc to interrupt" in ln]
    return lines[-1] if lines else ""


def finished(t: Term) -> bool:
    return any(s in t.toolbar() for s in FINISHED)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return prepare_project(load_scenario(find_scenario("fix-pagination")), tmp_path / "proj")


def test_a_live_line_runs_under_a_turn_and_typeahead_after_a_cancel_waits_for_enter(
    tmp_path: Path, project: Path
) -> None:
    t = start(tmp_path, project, time_scale=1.0)
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        # Before the first token: spinner, elapsed time, esc to interrupt.
        t.wait(lambda: "Working… (" in status_line(t), "the live line")
        t.type("y")
        t.wait(lambda: status_line(t).endswith("› y"), "the key typed ahead, shown")
        t.keys("Enter")
        t.wait(lambda: status_line(t).endswith("› y⏎"), "its Enter, shown")
        t.keys("Escape")
        t.wait(lambda: "turn cancelled; the session goes on" in t.screen(), "the cancellation")
        t.wait(lambda: t.input_line().rstrip() == "› y", "the typed-ahead text back in the prompt, unsent")
        end = time.monotonic() + 1.5  # its Enter must not send it: nothing is answered meanwhile
        while time.monotonic() < end:
            assert "[simulator]" not in t.scrollback() and "esc to interrupt" not in t.screen()
            time.sleep(0.1)
        t.keys("Enter")  # a fresh Enter sends it
        t.wait(lambda: "[simulator]" in t.scrollback(), "the stray y answered only now")
        assert "esc to interrupt" not in t.toolbar()  # the live line is gone after the turn
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()


def test_a_permission_question_shows_the_diff_and_its_scope_and_esc_says_no(
    tmp_path: Path, project: Path
) -> None:
    h0 = tree_hash(project)
    t = start(tmp_path, project, time_scale=0.05, extra="--mode default --spec-edits stop")
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        # The first turn's tool output, collapsed: /last (or ctrl+o) shows it whole.
        t.wait(lambda: "read 40 lines (ctrl+o or /last to expand)" in t.screen(), "a collapsed Read")
        t.wait(lambda: "stopped at boundary (edit" in t.toolbar(), "the fork stopped before its first edit")
        t.keys("C-o")
        t.wait(
            lambda: "all 40 lines" in t.scrollback() and "def paginate(" in t.scrollback(), "the Read, whole"
        )
        t.keys("Tab", "Enter")
        t.wait(lambda: "allow Edit(" in t.screen(), "the permission prompt")
        screen = t.screen()
        assert "+def test_pages_do_not_overlap():" in screen and "@@ -15,6 +15,12 @@" in screen
        assert "always: allow every Edit call for the rest of this session (rule Edit); Esc: no" in screen
        colours = t.tmux("capture-pane", "-p", "-e", "-t", t.target)
        assert "\x1b[32m+def test_pages_do_not_overlap():" in colours  # additions in green
        t.keys("Escape")
        t.wait(lambda: "✗ Edit(" in t.screen() and "denied" in t.screen(), "Esc answered no")
        assert "[y/n/always] n" in t.scrollback()
        t.wait(
            lambda: "allow Bash(" in t.screen().split("denied")[-1] or "saved" in t.toolbar(),
            "the turn going on",
        )
        t.keys("C-c")
        t.wait(lambda: "turn cancelled" in t.scrollback() or "saved" in t.toolbar(), "the prompt back")
        assert tree_hash(project) == h0
    finally:
        t.close()


def test_diff_shows_the_last_accepted_change_in_colour(tmp_path: Path, project: Path) -> None:
    t = start(tmp_path, project, time_scale=0.05)
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: P2 in t.input_line() and finished(t), "the speculation, finished")
        t.keys("Tab", "Enter")
        t.answer_until(lambda: "speculation accepted" in t.scrollback(), "the acceptance")
        t.wait(lambda: "saved" in t.toolbar() and t.input_line().startswith("›"), "the prompt")
        t.type("/diff")
        t.keys("Enter")
        t.wait(
            lambda: "what the last accepted speculation changed in the project:" in t.scrollback(), "/diff"
        )
        t.wait(
            lambda: "+def test_pages_do_not_overlap():" in t.scrollback().split("last accepted")[-1],
            "its diff",
        )
        full = t.tmux("capture-pane", "-p", "-e", "-S", "-", "-t", t.target)
        assert "\x1b[32m+def test_pages_do_not_overlap():" in full and "\x1b[31m-" in full
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()


def test_a_speculation_the_real_tree_moved_under_is_discarded_before_it_is_shown(
    tmp_path: Path, project: Path
) -> None:
    t = start(tmp_path, project, time_scale=0.05)
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: P2 in t.input_line() and finished(t), "the speculation, finished")
        pager = project / "src" / "shop" / "pager.py"
        pager.write_text(pager.read_text() + "# the user's own note\n")  # read by the fork: a conflict now
        t.keys("Tab", "Enter")
        t.answer_until(lambda: "changed in the real tree" in t.scrollback(), "the discard note", timeout=60)
        t.answer_until(
            lambda: "I'll add a failing test first" in t.scrollback().split(f"› {P2}")[-1], "the live rerun"
        )
        turn = t.scrollback().split(f"› {P2}")[-1]
        # Nothing of the fork was shown: its first line appears once, from the live rerun, after the note that
        # introduces it (issue #37: the note came after the live answer).
        assert turn.count("I'll add a failing test first") == 1, turn
        assert turn.index("changed in the real tree") < turn.index("I'll add a failing test first"), turn
        assert "speculation accepted" not in turn
        assert "# the user's own note" in pager.read_text()
    finally:
        t.close()


def test_esc_during_an_accepted_answer_says_nothing_landed(tmp_path: Path, project: Path) -> None:
    h0 = tree_hash(project)
    t = start(tmp_path, project, time_scale=1.0, extra="--mode bypassPermissions")
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(
            lambda: P2 in t.input_line() and "speculating (" in t.toolbar(),
            "a running speculation",
            timeout=60,
        )
        t.keys("Tab", "Enter")  # accepted while it runs: its part so far is shown, the rest streams
        t.wait(lambda: "I'll add a failing test first" in t.screen(), "the accepted answer streaming")
        t.keys("Escape")
        t.wait(
            lambda: "turn cancelled: nothing of the accepted speculation was applied" in t.scrollback(),
            "what the cancel left",
        )
        assert tree_hash(project) == h0
    finally:
        t.close()


def test_a_real_project_starts_in_default_mode_the_demo_in_accept_edits(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "a.py").write_text("x = 1\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPECULATE_HISTORY": str(tmp_path / "h")}
    cmd = [sys.executable, "-m", "speculate.cli", "repl", "--plain", "--no-spec"]
    mine = subprocess.run(
        [*cmd, str(own)], input="/quit\n", capture_output=True, text=True, env=env, timeout=60
    )
    assert "; mode default;" in mine.stdout, mine.stdout
    demo = subprocess.run(
        [*cmd, str(tmp_path / "demo")], input="/quit\n", capture_output=True, text=True, env=env, timeout=60
    )
    assert "mode acceptEdits (the demo's; --permission-mode default asks before edits)" in demo.stdout, (
        demo.stdout
    )
