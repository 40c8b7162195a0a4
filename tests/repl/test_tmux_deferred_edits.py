"""Default mode in a real terminal (#37 item 2): the speculation writes its edits into its overlay and, on
Tab+Enter, the REPL lists every call the live path would have asked about, each edit with its diff, and asks
once. y lands the speculation's work without another question; n leaves the project as it was and the turn
runs live, asking as typed."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from speculate.repl.demo import find_scenario, prepare_project
from speculate.sim.scenario_yaml import load_scenario
from tests.repl.tmuxkit import P1, P2, Term, tree_hash

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
TEST = "tests/test_pager.py"
NEW_TEST = "def test_pages_do_not_overlap():"


def live_questions(
    t: Term, done: Callable[[], bool], first: Callable[[], None], timeout: float = 60.0
) -> list[str]:
    """Answer y to each question after the acceptance question (answered n) until ``done``; the questions.
    ``first()`` runs when the first one is on screen, before it is answered."""
    asked: list[str] = []
    end = time.monotonic() + timeout
    while not done():
        text = t.scrollback()
        yes = text.count("[y/n/always] y")
        if text.count("[y/n/always]") - 1 > yes:
            if not asked:
                first()
            asked.append(text.rsplit("[y/n/always]", 1)[0].splitlines()[-1].strip())
            t.type("y")
            t.keys("Enter")
            t.wait(lambda n=yes: t.scrollback().count("[y/n/always] y") > n, "the answer taken")
            continue
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for the live turn; screen:\n{text}")
        time.sleep(0.05)
    return asked


@pytest.mark.parametrize("answer", ["y", "n"])
def test_default_mode_edits_are_shown_with_their_diff_and_asked_once(tmp_path: Path, answer: str) -> None:
    from speculate.speculation.sandbox_shell import bash_sandbox

    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    project = prepare_project(load_scenario(find_scenario("fix-pagination")), tmp_path / "proj")
    t = Term()
    try:
        t.start(
            f"SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} -m speculate.cli repl {project} "
            f"--scenario fix-pagination --time-scale 0.05 --mode default; echo EXIT=$?; sleep 60"
        )
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        # The speculation went past its edits (the default --spec-edits ask): ready, with what to approve.
        t.wait(
            lambda: P2 in t.input_line() and "to approve" in t.toolbar(), "the speculation, ready", timeout=60
        )
        h0 = tree_hash(project)
        assert NEW_TEST not in (project / TEST).read_text()  # its edits are in its overlay only
        t.keys("Tab", "Enter")
        t.wait(lambda: "accept the speculation with what it ran? [y/n/always]" in t.screen(), "the question")
        screen = t.scrollback()
        assert f"→ wrote {TEST}" in screen and "→ wrote src/shop/pager.py" in screen, screen  # each edit
        assert f"\n    +{NEW_TEST}\n" in screen and "\n    +++ b/src/shop/pager.py\n" in screen, (
            screen
        )  # its diff
        assert "allow Edit(" not in screen and tree_hash(project) == h0
        t.type(answer)
        t.keys("Enter")
        if answer == "y":
            t.wait(lambda: "speculation accepted" in t.scrollback(), "the accepted line", timeout=30)
            assert "allow Edit(" not in t.scrollback()  # asked once, at acceptance
        else:
            # Nothing landed; the live turn asks as typed (each question answered y).

            def unchanged() -> None:  # nothing of the speculation landed: the live turn starts from h0
                assert tree_hash(project) == h0

            asked = live_questions(
                t,
                lambda: "what it ran was not approved" in t.scrollback() and "Full suite:" in t.scrollback(),
                unchanged,
            )
            assert any(q.startswith("allow Edit(") for q in asked), asked
            assert "speculation accepted" not in t.scrollback()
        assert NEW_TEST in (project / TEST).read_text()
        t.wait(lambda: "working" not in t.toolbar() and t.input_line().startswith("›"), "the prompt")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()
