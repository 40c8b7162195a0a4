"""End to end in a real terminal: the REPL on the simulator demo inside tmux, driven by keystrokes and
read off the screen, with the project tree hashed to see what speculation did (and did not) change."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from speculate.repl.demo import find_scenario, prepare_project
from speculate.sim.scenario_yaml import load_scenario
from tests.repl.tmuxkit import FINISHED, P1, P2, Term, repl_command, start_repl, tree_hash

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return prepare_project(load_scenario(find_scenario("fix-pagination")), tmp_path / "proj")


@pytest.fixture
def term(tmp_path: Path, project: Path) -> Iterator[Term]:
    t = Term()
    try:
        t.start(repl_command(tmp_path, project, time_scale=0.05))
        yield t
    finally:
        t.close()


def test_ghost_tab_speculation_ignore_and_accept(term: Term, project: Path) -> None:
    h0 = tree_hash(project)
    # First turn: the demo offers the scripted prompt as ghost text in the empty input.
    term.wait(lambda: P1 in term.input_line(), "the first prompt as ghost text")
    # The toolbar is drawn after the input line: under load a capture can fall between the two.
    term.wait(lambda: "acceptEdits" in term.toolbar(), "the toolbar")
    assert "idle" in term.toolbar()
    term.keys("Enter")  # an empty Enter does nothing (the ghost is not taken)
    time.sleep(0.3)
    assert "off-by-one" not in term.scrollback()
    term.keys("Tab")
    term.keys("Enter")
    term.wait(lambda: "off-by-one" in term.scrollback(), "the first answer")
    # After the turn: suggestion, speculation in the overlay, its state in the toolbar.
    seen: set[str] = set()

    def finished() -> bool:
        bar = term.toolbar()
        seen.update(s for s in ("generating", "speculating (", *FINISHED) if s in bar)
        return any(s in bar for s in FINISHED)

    term.wait(finished, "the speculation to finish")
    assert P2 in term.input_line()
    assert tree_hash(project) == h0, "a running speculation touched the real tree"

    # A typo hides the ghost text but keeps the speculation; Backspace brings both back.
    term.type("fix iy")
    term.wait(lambda: P2 not in term.input_line() and "fix iy" in term.input_line(), "the ghost hidden")
    assert any(s in term.toolbar() for s in FINISHED), "a typo threw the speculation away"
    term.keys("BSpace")
    term.wait(lambda: P2 in term.input_line(), "the ghost text back after Backspace")
    term.keys("C-u")
    # Send something else: the speculation is dropped and the tree stays as it was.
    term.type("no")
    term.wait(lambda: P2 not in term.input_line(), "the ghost hidden")
    term.type(", explain page_bounds first")
    term.keys("Enter")
    term.wait(lambda: "[simulator]" in term.scrollback(), "the simulator's fallback answer")
    assert "ready (" not in term.toolbar()
    term.wait(lambda: term.input_line().startswith("›") and "working" not in term.toolbar(), "the prompt")
    assert tree_hash(project) == h0, "an ignored speculation changed the real tree"

    # Start over and accept: the speculated edits land in the project.
    term.type("/clear")
    term.keys("Enter")
    term.wait(lambda: P1 in term.input_line(), "the first prompt again after /clear")
    term.keys("Tab", "Enter")
    term.wait(lambda: term.scrollback().count("off-by-one in `paginate`") == 2, "the first answer again")
    term.wait(lambda: P2 in term.input_line() and finished(), "the second speculation")
    assert tree_hash(project) == h0
    # /diff shows what the speculation would change, and does not abort it.
    term.type("/diff")
    term.keys("Enter")
    term.wait(lambda: "+def test_pages_do_not_overlap():" in term.screen(), "the speculation's diff")
    term.wait(lambda: P2 in term.input_line() and finished(), "the prediction back after /diff")
    term.keys("Right", "Enter")
    # Its pytest runs are what the live path asks about in acceptEdits: shown with what they changed, asked once.
    asked = term.answer_until(lambda: "speculation accepted" in term.scrollback(), "the acceptance")
    assert asked == ["accept the speculation with what it ran?"], (asked, term.scrollback())
    # what it wrote: only the caches a test run leaves, which git ignores (counted, not listed: issue #37)
    assert (
        "  Bash(python -m pytest -q) → wrote " in term.scrollback()
        and "files git ignores (" in term.scrollback()
    )
    term.wait(lambda: "Full suite" in term.scrollback(), "the final answer")
    assert "test_pages_do_not_overlap" in (project / "tests/test_pager.py").read_text()
    assert "items[start:end]" in (project / "src/shop/pager.py").read_text()
    assert seen & {"speculating (", *FINISHED}, f"toolbar states seen: {seen}"

    term.wait(lambda: "saved" in term.toolbar() and "working" not in term.toolbar(), "the prompt")
    term.keys("C-d")
    term.wait(lambda: "EXIT=0" in term.scrollback(), "a clean exit")
    assert str(project) not in Path("/proc/mounts").read_text()


def test_ctrl_c_cancels_the_turn_and_keeps_the_session(tmp_path: Path, project: Path) -> None:
    h0 = tree_hash(project)
    t = Term()
    try:
        t.start(repl_command(tmp_path, project, time_scale=1.0))
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: "Let me find the pagination code." in t.screen(), "the turn to start streaming")
        t.keys("C-c")
        t.wait(lambda: "turn cancelled; the session goes on" in t.screen(), "the cancellation")
        assert "off-by-one" not in t.scrollback()  # the rest of the turn did not run
        t.type("/model")
        t.keys("Enter")
        t.wait(lambda: "model: " in t.screen() and "via sim" in t.screen(), "/model's answer")
        t.type("/stats")
        t.keys("Enter")
        t.wait(lambda: "of those shown taken" in t.screen(), "/stats' answer")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
        assert tree_hash(project) == h0
        assert (tmp_path / "history").read_text().count("/model") == 1  # history persisted
    finally:
        t.close()


def test_accepting_a_running_speculation_streams_it_live(tmp_path: Path, project: Path) -> None:
    t = start_repl(tmp_path, project, time_scale=0.5)
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: P2 in t.input_line() and "speculating (1 tool" in t.toolbar(), "a running speculation")
        t.keys("Tab", "Enter")
        # At once: what the fork already did (its text and the Read line) is on screen. (3 s, not the
        # ~1 s it takes, for a loaded machine; "Full suite" not yet shown, below, is the ordering proof.)
        t.wait(
            lambda: "I'll add a failing test first" in t.screen() and "✓ Read(" in t.screen(),
            "the fork's finished part",
            timeout=3.0,
        )
        # The rest streams: tool lines appear while the final answer is still to come. The user is there
        # now: each pytest run the fork reaches is asked about at the call, as the live path asks.
        asked = t.answer_until(
            lambda: "Bash(python -m pytest -q tests/test_pager.py) " in t.screen(),
            "a tool line of the live part (✗: the new test fails first, as it should)",
        )
        # (Had the fork run it before the Tab+Enter reached it, the question would have come on acceptance.)
        assert asked in (
            ["allow Bash(python -m pytest -q tests/test_pager.py)?"],
            ["accept the speculation with what it ran?"],
        ), asked
        assert "Full suite" not in t.scrollback(), "the answer came all at once"
        asked = t.answer_until(lambda: "speculation accepted" in t.scrollback(), "the acceptance line")
        assert asked == ["allow Bash(python -m pytest -q)?"], asked
        assert t.scrollback().count("Full suite: 29 passed") == 1  # streamed once, not repeated at the end
        line = next(ln for ln in t.scrollback().splitlines() if "speculation accepted" in ln)
        # One line that fits, the person's files named, the tool caches pytest wrote summarised.
        assert len(line) <= 120 and "tests/test_pager.py" in line and "in caches" in line, line
        assert ".pytest_cache/" not in line and " 1 tools" not in line
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()


def test_accepting_at_a_boundary_shows_the_done_part_then_asks_and_denials_are_visible(
    tmp_path: Path, project: Path
) -> None:
    h0 = tree_hash(project)
    t = start_repl(tmp_path, project, time_scale=0.05, extra="--mode default --spec-edits stop")
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: "stopped at boundary (edit" in t.toolbar(), "the fork stopped before its first edit")
        t.keys("Tab", "Enter")
        t.wait(lambda: "allow Edit(" in t.screen(), "the permission prompt")
        turn = t.screen().split(P2)[-1]  # from the accepted prompt on
        assert turn.index("I'll add a failing test first") < turn.index("✓ Read(") < turn.index("allow Edit(")
        t.type("maybe")
        t.keys("Enter")
        t.wait(lambda: "'maybe' is not an answer: type y, n or always" in t.screen(), "what is expected")
        t.type("n")
        t.keys("Enter")
        t.wait(lambda: "✗ Edit(" in t.screen() and "denied" in t.screen(), "the denial line")
        # The turn goes on: its next question, or the prompt back (the live line under a running turn has
        # a "(" too, so the toolbar's "saved" marks the prompt).
        t.wait(
            lambda: "allow " in t.screen().split("denied")[-1] or "saved" in t.toolbar(), "the turn going on"
        )
        t.keys("C-c")
        t.wait(lambda: "turn cancelled" in t.scrollback() or "saved" in t.toolbar(), "the prompt back")
        assert tree_hash(project) == h0
    finally:
        t.close()


@pytest.mark.parametrize("how", ["SIGHUP", "SIGTERM"])
def test_closing_the_terminal_or_sigterm_removes_temp_and_spill_dirs(tmp_path: Path, how: str) -> None:
    tmp, state = tmp_path / "tmp", tmp_path / "state"
    tmp.mkdir()
    t = Term()
    try:
        # The demo in a temporary directory of its own (no DIR), with a speculation running on it.
        t.start(
            f"TMPDIR={tmp} SPECULATE_STATE_DIR={state} SPECULATE_HISTORY={tmp_path / 'history'} "
            f"exec {sys.executable} -m speculate.cli repl --time-scale 0.5"
        )
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: "speculating (" in t.toolbar(), "a running speculation")
        made = {p.name.split("-")[1] for p in tmp.iterdir()}
        assert {"demo", "repl"} <= made, made  # speculate-demo-*, speculate-repl-spill-*
        pid = int(t.tmux("list-panes", "-t", t.target, "-F", "#{pane_pid}").strip())
        if how == "SIGHUP":
            t.close()  # the terminal goes away: the kernel hangs up on the REPL
        else:
            subprocess.run(["kill", "-TERM", str(pid)], check=True)
        end = time.monotonic() + 20
        while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists(), f"the REPL did not exit on {how}"
        assert [p.name for p in tmp.iterdir()] == []
        assert str(tmp) not in Path("/proc/mounts").read_text()
    finally:
        t.close()


def test_esc_interrupts_a_streaming_turn_and_ctrl_c_stops_a_speculation(
    tmp_path: Path, project: Path
) -> None:
    h0 = tree_hash(project)
    t = start_repl(tmp_path, project, time_scale=1.0)
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: "Let me find the pagination code." in t.screen(), "the turn to start streaming")
        t.keys("Escape")
        t.wait(lambda: "turn cancelled; the session goes on" in t.screen(), "Esc to interrupt the turn")
        assert "^[" not in t.screen() and "off-by-one" not in t.scrollback()
        # Run the first turn through (fast), then stop its speculation with Ctrl-C at the prompt.
        t.type("/clear")
        t.keys("Enter")
        t.wait(lambda: P1 in t.input_line(), "the first prompt again")
        t.keys("Tab", "Enter")
        t.wait(lambda: "speculating (" in t.toolbar(), "a running speculation", timeout=60)
        t.type("fix")
        t.keys("C-c")
        t.wait(lambda: "speculation aborted" in t.toolbar(), "Ctrl-C to stop the speculation")
        assert "› fix" in t.input_line()  # the line stays
        t.keys("C-c")
        t.wait(
            lambda: [ln for ln in t.screen().splitlines() if ln.startswith("›")][-1].rstrip() == "›",
            "a second Ctrl-C to clear the line",
        )
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
        assert tree_hash(project) == h0
    finally:
        t.close()


def test_narrow_terminal_toolbar_spec_state_and_commands_that_take_no_arguments(
    tmp_path: Path, project: Path
) -> None:
    t = Term()
    try:
        t.start(
            repl_command(tmp_path, project, time_scale=0.05).replace(
                "--time-scale 0.05", "--time-scale 0.05 --mode default --spec-edits stop"
            ),
            width=60,
        )
        t.wait(lambda: "› why does page 2 of the product" in t.screen(), "the first prompt as ghost text")
        for cmd in ("/model x", "/clear now", "/diff all"):
            t.type(cmd)
            t.keys("Enter")
            t.wait(
                lambda cmd=cmd: (
                    f"{cmd.split()[0]} takes no arguments (got '{cmd.split()[1]}')" in t.scrollback()
                ),
                f"{cmd} refused",
            )
        t.keys("Tab", "Enter")
        # The fork stops at its first edit (default mode); the toolbar fits 60 columns: the path shortened,
        # the stop reason wrapped onto a second line, not cut.
        t.wait(lambda: "needs permission)" in t.toolbar(), "the boundary in the toolbar")
        above, bar = [ln for ln in t.screen().splitlines() if ln.strip()][-2:]
        assert above.strip().startswith("stopped at boundary (edit: Edit …/") and len(above.rstrip()) <= 60, (
            above
        )
        assert bar.rstrip().endswith("│ default") and len(bar.rstrip()) <= 60, bar
        t.type("/spec off")
        t.keys("Enter")
        t.type("/spec on")  # typed ahead while /spec off may still be handled: its Enter must still send it
        t.keys("Enter")
        t.wait(
            lambda: (
                "speculation off" in t.scrollback()
                and "speculation on" in t.screen()
                and t.toolbar().strip().startswith("idle")
            ),
            "both answered, and a fresh state",
        )
        t.type("/stats")
        t.keys("Enter")
        t.wait(lambda: "speculations" in t.screen() and "time saved" in t.screen(), "/stats")
        assert "0.0000" not in t.scrollback() and "accepted_turns" not in t.scrollback()
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()


def test_an_enter_typed_ahead_between_prompts_sends_the_line(tmp_path: Path, project: Path) -> None:
    """Keys typed while no prompt runs (``/accept`` waiting for the prediction) reach the next prompt with
    their Enter as Enter: the terminal must not turn it into Ctrl-J, a newline in the input. (Bypass mode:
    the accepted fork's pytest runs would otherwise be asked about, and the typed-ahead line answer it.)"""
    t = start_repl(tmp_path, project, time_scale=0.5, extra="--mode bypassPermissions")
    try:
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        # The turn is over (its time is shown) and the suggestion for turn 2 takes ~0.7 s at this scale:
        # /accept waits for it with no prompt running, and /help is typed during that wait.
        t.wait(lambda: re.search(r"^\(\d+\.\ds\)$", t.scrollback(), re.M) is not None, "the first turn's end")
        t.type("/accept")
        t.keys("Enter")
        t.type("/help")
        t.keys("Enter")
        t.wait(
            lambda: "speculation accepted" in t.scrollback() and "commands:" in t.scrollback(),
            "the accepted turn, then /help run as typed",
            timeout=40,
        )
        t.wait(lambda: "/help" not in t.input_line(), "a fresh prompt after /help")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()


@pytest.mark.parametrize("answer", ["n", "y"])
def test_a_speculated_rm_is_asked_about_on_acceptance_and_no_runs_it_live_as_typed(
    tmp_path: Path, answer: str
) -> None:
    """Default mode, the issue's case: the fork runs `rm -rf build` in its sandbox; Tab+Enter shows it and
    what it changed and asks once. n: nothing of it lands, the turn runs live and asks `allow Bash(rm -rf
    build)?` as typed; y: it lands, and the accepted line says it deleted build/."""
    project = tmp_path / "proj"  # new: the demo sets up the scenario's project in it
    scenario = load_scenario(find_scenario("clean-stale-build"))
    first, second = scenario.turns[0].prompt, scenario.turns[1].prompt
    t = Term()
    try:
        t.start(
            f"SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} -m speculate.cli repl {project} "
            f"--scenario clean-stale-build --time-scale 0.05 --mode default; echo EXIT=$?; sleep 60"
        )
        t.wait(lambda: first in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: second in t.input_line() and "1 to approve" in t.toolbar(), "the speculation, ready")
        assert (project / "build" / "lib" / "shop" / "pricing.py").exists()  # the fork's rm is in its overlay
        t.keys("Tab", "Enter")
        t.wait(lambda: "accept the speculation with what it ran? [y/n/always]" in t.screen(), "the question")
        assert "  Bash(rm -rf build) → deleted build/" in t.screen()
        assert "allow Bash(rm -rf build)?" not in t.scrollback() and (project / "build").exists()
        t.type(answer)
        t.keys("Enter")
        if answer == "n":
            t.wait(lambda: "allow Bash(rm -rf build)? [y/n/always]" in t.screen(), "the live path's question")
            assert (project / "build").exists()  # nothing of the speculation landed
            t.type("y")
            t.keys("Enter")
            t.wait(
                lambda: (
                    "Removed `build/`." in t.scrollback() and "what it ran was not approved" in t.scrollback()
                ),
                "the live turn's answer, then why the speculation was not used",
            )
            assert "speculation accepted" not in t.scrollback()
        else:
            t.wait(lambda: "speculation accepted" in t.scrollback(), "the accepted line")
            line = next(ln for ln in t.scrollback().splitlines() if "speculation accepted" in ln)
            assert "deleted build/" in line and "wrote build" not in line, line
            assert "allow Bash(rm -rf build)?" not in t.scrollback()
        assert not (project / "build").exists()
        t.wait(lambda: "working" not in t.toolbar() and t.input_line().startswith("›"), "the prompt")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()
