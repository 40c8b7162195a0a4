"""Issue #37 in a real terminal (tmux), as a Claude Code user would try it: the / menu with descriptions and
Tab completion, @path completion, shift+tab through the modes, !cmd and #memory, a large paste as a
placeholder, a stray answer that is not sent, and --continue; a study that writes nothing outside its
directory (the home directory grepped after it); /diff with the files git ignores in one line and /diff last
after a read-only acceptance; the toolbar when the policy abstains and with two forks; the demo, off its
script after a refused command instead of reporting what did not run."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from speculate.repl.demo import find_scenario, prepare_project
from speculate.sim.scenario_yaml import load_scenario
from tests.repl.tmuxkit import FINISHED, P1, P2, Term

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
P3 = "run the CLI to check page 2"
# Everything that decides where files go, reset so that they all go under the test's HOME.
CLEAN_ENV = (
    "env -u SPECULATE_HISTORY -u SPECULATE_STATE_DIR -u XDG_STATE_HOME -u XDG_CONFIG_HOME -u XDG_DATA_HOME"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return prepare_project(load_scenario(find_scenario("fix-pagination")), tmp_path / "proj")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def start(home: Path, project: Path, extra: str = "") -> Term:
    t = Term()
    t.start(
        f"{CLEAN_ENV} HOME={home} {sys.executable} -m speculate.cli repl {project} --scenario fix-pagination "
        f"--time-scale 0.05 {extra}; echo EXIT=$?; sleep 60"
    )
    return t


def finished(t: Term) -> bool:
    return any(s in t.toolbar() for s in FINISHED)


def idle_prompt(t: Term, ghost: str) -> None:
    t.answer_until(lambda: t.input_line().strip() == f"› {ghost}", f"the ghost text {ghost!r}", timeout=60)


def saved_sessions(home: Path) -> str:
    return "".join(p.read_text() for p in (home / ".local/state/speculate/sessions").rglob("*.jsonl"))


def leave(t: Term) -> None:
    t.keys("C-d")
    t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")


def test_claude_code_input_conventions_then_continue(home: Path, project: Path) -> None:
    t = start(home, project)
    try:
        idle_prompt(t, P1)
        # "/" opens the menu of commands, each with what it does; Tab completes.
        t.type("/")
        t.wait(lambda: "/compact" in t.screen() and "forget the conversation" in t.screen(), "the / menu")
        t.type("mo")
        t.wait(lambda: "/model" in t.screen() and "/compact" not in t.screen(), "the menu narrowed")
        t.keys("Tab")
        t.wait(lambda: t.input_line().strip() == "› /mode", "/mo completed")
        t.keys("C-u")
        # @ completes a path of the project.
        t.type("explain @src/shop/pag")
        t.wait(lambda: "pager.py" in t.screen().split("explain @src/shop/pag")[-1], "the @ menu")
        t.keys("Tab")
        t.wait(lambda: t.input_line().strip() == "› explain @src/shop/pager.py", "@path completed")
        t.keys("C-u")
        # shift+tab cycles the modes as Claude Code does; the toolbar shows the mode.
        modes = []
        for _ in range(3):
            before = t.toolbar()
            t.keys("BTab")
            t.wait(lambda b=before: t.toolbar() != b, "the mode changed")
            modes.append(t.toolbar().rsplit("│", 1)[-1].strip())
        assert modes == ["plan", "default", "acceptEdits"], modes
        # !cmd runs in the project and shows its output; #text asks which file and appends the line.
        t.type("!ls src")
        t.keys("Enter")
        t.wait(lambda: "! ls src" in t.scrollback() and "⎿ shop" in t.scrollback(), "the ! command's output")
        t.type("# always use type hints")
        t.keys("Enter")
        t.wait(lambda: "save this memory to project (CLAUDE.md)" in t.screen(), "the memory question")
        t.type("project")
        t.keys("Enter")
        t.wait(lambda: "memory saved to" in t.scrollback(), "the memory saved")
        assert (project / "CLAUDE.md").read_text().endswith("- always use type hints\n")
        # A large paste is a placeholder on screen, sent whole.
        t.tmux("set-buffer", "".join(f"paste line {i}\n" for i in range(300)))
        t.tmux("paste-buffer", "-p", "-t", t.target)
        t.wait(lambda: "[Pasted text #1 +300 lines]" in t.input_line(), "the placeholder")
        t.type(" count these")
        t.keys("Enter")
        t.wait(lambda: "[simulator]" in t.scrollback(), "the answer to the paste")
        assert "paste line 150" not in t.scrollback()
        # The demo goes on: the ! output and the paste are in the conversation, the script is not lost.
        idle_prompt(t, P1)
        t.keys("Tab", "Enter")
        t.wait(lambda: "off-by-one" in t.scrollback(), "the scripted answer to P1")
        idle_prompt(t, P2)
        t.keys("BTab")  # plan, to see it restored
        t.wait(lambda: t.toolbar().endswith("plan"), "plan mode")
        leave(t)
    finally:
        t.close()
    saved = saved_sessions(home)
    assert "paste line 150" in saved and "<bash-input>ls src</bash-input>" in saved

    t = start(home, project, "--continue")
    try:
        t.wait(lambda: "continuing session" in t.scrollback(), "the session restored")
        t.wait(lambda: t.toolbar().endswith("plan"), "its mode")
        assert f"› {P1}" in t.scrollback()
        idle_prompt(t, P2)  # the demo's place in the script too
        t.keys("BTab", "BTab")  # plan -> default -> acceptEdits
        t.wait(lambda: t.toolbar().endswith("acceptEdits"), "acceptEdits")
        t.keys("Tab", "Enter")  # a scripted answer needs the conversation before it
        t.answer_until(lambda: "Full suite" in t.scrollback(), "the scripted answer to P2", timeout=60)
        assert "No scripted response" not in t.scrollback().split("continuing session")[-1]
        # A bare answer typed after the question was answered is not a prompt.
        t.wait(lambda: t.input_line().startswith("›") and "working" not in t.toolbar(), "the prompt")
        t.keys("C-u")
        t.type("always")
        t.keys("Enter")
        t.wait(lambda: "not sent: the question it answers was already answered" in t.scrollback(), "not sent")
        leave(t)
    finally:
        t.close()


def test_a_study_writes_nothing_outside_its_directory_and_shows_no_arm(
    tmp_path: Path, home: Path, project: Path
) -> None:
    study = tmp_path / "study"
    study.mkdir()
    (study / "consent.json").write_text('{"user": "p1", "agreed_at": 0.0, "text": "earlier"}')
    t = start(home, project, f"--study {study} --study-seed 4")  # seed 4: turn 2 is speculative
    try:
        idle_prompt(t, P1)
        t.keys("Tab", "Enter")
        t.wait(lambda: "off-by-one" in t.scrollback(), "the first answer")
        idle_prompt(t, P2)
        t.keys("Tab", "Enter")
        t.answer_until(lambda: "Full suite" in t.scrollback(), "the second answer", timeout=60)
        # The next ghost text, not any line starting with › (the turns' own prompts do): the turn is over.
        idle_prompt(t, P3)
        screen = t.scrollback()
        assert "⚡" not in screen and "speculation accepted" not in screen and "saved" not in t.toolbar()
        leave(t)
    finally:
        t.close()
    assert (study / "sessions").is_dir()
    leaks = []
    for root, _, files in os.walk(home):
        for name in files:
            data = (Path(root) / name).read_bytes()
            if any(s.encode() in data for s in (P1, P2, "page 2 of the product", str(project))):
                leaks.append(str(Path(root) / name))
    assert leaks == [], leaks


def test_diff_summarises_ignored_files_and_diff_last_keeps_the_last_real_change(
    home: Path, project: Path
) -> None:
    t = start(home, project)
    try:
        idle_prompt(t, P1)
        t.keys("Tab", "Enter")
        t.wait(lambda: P2 in t.input_line() and finished(t), "the speculation of P2, finished", timeout=60)
        t.type("/diff")
        t.keys("Enter")
        t.wait(lambda: "files git ignores (" in t.scrollback(), "/diff with the ignored files in one line")
        shown = t.scrollback().split("what the running speculation would change")[-1]
        assert "+def test_pages_do_not_overlap():" in shown
        assert "diff --git a/.pytest_cache" not in shown and "__pycache__/" in shown  # named once, no hunk
        idle_prompt(t, P2)
        t.keys("Tab", "Enter")
        asked = t.answer_until(lambda: "Full suite" in t.scrollback(), "the fix accepted", timeout=60)
        assert asked and ".pytest_cache/v" not in t.scrollback().split("accept the speculation")[0][-2000:]
        idle_prompt(t, P3)
        t.wait(lambda: finished(t), "the speculation of P3", timeout=60)
        t.keys("Tab", "Enter")  # it runs the CLI: nothing of the project changes
        t.answer_until(
            lambda: t.scrollback().count("(") and "working" not in t.toolbar() and P3 not in t.input_line(),
            "the CLI run",
            timeout=60,
        )
        t.wait(lambda: t.input_line().startswith("›") and "working" not in t.toolbar(), "the prompt")
        t.type("/diff last")
        t.keys("Enter")
        t.wait(lambda: "what the last accepted speculation changed" in t.scrollback(), "/diff last")
        assert "+def test_pages_do_not_overlap():" in t.scrollback().split("/diff last")[-1]
        leave(t)
    finally:
        t.close()


TWO = """
name: two-forks
files:
  README.md: "# demo\\n"
turns:
  - prompt: "hello"
    steps:
      - tools:
          - Read: {file_path: README.md}
      - text: "hi"
    suggestions:
      - {text: "list the files", weight: 1}
      - text: "show the readme"
        weight: 1
        steps:
          - tools:
              - Read: {file_path: README.md}
          - text: "a readme"
  - prompt: "list the files"
    steps:
      - tools:
          - Glob: {pattern: "*"}
      - text: "done"
"""


@pytest.fixture
def two_runs(home: Path, project: Path) -> Iterator[tuple[Term, Term]]:
    a = start(home, project, "--spec-value 0")
    b = Term()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_the_toolbar_says_when_the_policy_abstained_and_which_fork_of_two_runs(
    tmp_path: Path, home: Path, two_runs: tuple[Term, Term]
) -> None:
    a, b = two_runs
    idle_prompt(a, P1)
    a.keys("Tab", "Enter")
    a.wait(lambda: "no fork: the policy abstained (P " in a.toolbar(), "the abstention in the toolbar")
    assert "costs ~$" in a.toolbar() and P2 in a.input_line()
    a.type("/spec")
    a.keys("Enter")
    a.wait(lambda: "value λ = $0 per second saved" in a.scrollback(), "/spec's policy")
    leave(a)
    scenario = tmp_path / "two.yaml"  # two candidates of equal weight: two forks
    scenario.write_text(TWO)
    b.start(
        f"{CLEAN_ENV} HOME={home} {sys.executable} -m speculate.cli repl {tmp_path / 'proj2'} "
        f"--scenario {scenario} --time-scale 0.05 --spec-candidates 2; echo EXIT=$?; sleep 60"
    )
    idle_prompt(b, "hello")
    b.keys("Tab", "Enter")
    b.wait(lambda: "2 forks" in b.toolbar(), "which fork of how many", timeout=60)
    assert "candidate 1, 2 forks" in b.toolbar() or "candidate 2, 2 forks" in b.toolbar()
    leave(b)


def test_the_demo_never_reports_a_command_that_was_refused(home: Path, project: Path) -> None:
    t = start(home, project, "--no-spec")
    try:
        idle_prompt(t, P1)
        t.keys("Tab", "Enter")
        t.wait(lambda: "off-by-one" in t.scrollback(), "the first answer")
        idle_prompt(t, P2)
        t.keys("Tab", "Enter")
        t.wait(lambda: "allow Bash(python -m pytest -q tests/test_pager.py)?" in t.screen(), "the question")
        t.type("n")
        t.keys("Enter")
        # The scripted words after the test run report its result ("fails as expected"): never said. The
        # script's next calls go on (the next question); their words are replaced by a marked note.
        t.wait(lambda: "[simulator] A call was not run" in t.scrollback(), "the simulator's marked note")
        t.wait(lambda: "allow Bash(python -m pytest -q)?" in t.screen(), "the next scripted call's question")
        t.type("n")
        t.keys("Enter")
        t.wait(lambda: "[simulator] The call was not run" in t.scrollback(), "the answer off its script")
        turn = t.scrollback().split(f"› {P2}")[-1]
        assert "fails as expected" not in turn and "1 failed" not in turn and "Fixed." not in turn, turn
        leave(t)
    finally:
        t.close()
