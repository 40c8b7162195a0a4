"""In a real terminal (#34 item 9): accepting a speculation that rewrote an 820 KB lockfile to about 1 MB
(difflib alone: 50 s and more) lands at once, and ``/diff last`` shows a summary instead of the diff."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from overlayfs.sandbox import sandbox_problem
from tests.repl.tmuxkit import Term
from tests.speculation.test_diffcap import lockfiles

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
P1 = "what pins the lockfile?"
P2 = "rewrite the lockfile"


def test_tab_accepts_a_lockfile_rewrite_at_once_and_diff_last_is_a_summary(tmp_path: Path) -> None:
    if (why := sandbox_problem()) is not None:
        pytest.skip(f"speculative Bash needs the sandbox: {why}")
    old, new = lockfiles()
    project = tmp_path / "proj"
    project.mkdir()
    (project / "yarn.lock").write_text(old)
    (project / ".new.lock").write_text(new)  # what the command copies in (the sandbox sees the project)
    scenario = {
        "name": "lockfile-rewrite",
        "description": "a command rewrites a large lockfile",
        "turns": [
            {
                "prompt": P1,
                "steps": [
                    {"tools": [{"Read": {"file_path": "{root}/yarn.lock", "limit": 5}}]},
                    {"text": "Yarn pins it."},
                ],
                "suggestion": P2,
            },
            {
                "prompt": P2,
                "steps": [
                    {"tools": [{"Bash": {"command": "cat .new.lock > yarn.lock"}}]},
                    {"text": "Rewritten."},
                ],
                "suggestion": None,
            },
        ],
    }
    path = tmp_path / "lockfile.yaml"
    path.write_text(json.dumps(scenario))  # JSON is YAML
    t = Term()
    try:
        t.start(
            f"SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} -m speculate.cli repl {project} "
            f"--scenario {path} --time-scale 0.05; echo EXIT=$?; sleep 60"
        )
        t.wait(lambda: P1 in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: "Yarn pins it." in t.scrollback(), "the first answer")
        try:
            t.wait(lambda: P2 in t.input_line() and "ready (" in t.toolbar(), "the speculation, finished", 40)
        except AssertionError:
            t.type("/stats")
            t.keys("Enter")
            time.sleep(2)
            raise AssertionError(f"no finished speculation; /stats says:\n{t.scrollback()}") from None
        t.keys("Tab", "Enter")
        start = time.monotonic()
        t.answer_until(lambda: "speculation accepted" in t.scrollback(), "the acceptance")
        took = time.monotonic() - start
        t.wait(lambda: "Rewritten." in t.scrollback(), "the answer")
        assert took < 8.0, took  # the question answered, promotion, and a diff bounded at 1 s
        assert (project / "yarn.lock").read_text() == new
        t.wait(lambda: "working" not in t.toolbar() and t.input_line().startswith("›"), "the prompt")
        t.type("/diff last")
        t.keys("Enter")
        t.wait(lambda: "(the diff is left out: it took longer than 1 s" in t.scrollback(), "the summary")
        t.wait(lambda: " yarn.lock | modified, 820." in t.scrollback(), "the lockfile's row")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
    finally:
        t.close()
