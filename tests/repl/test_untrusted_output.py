"""Terminal escapes in untrusted text (issue #22, E4) never reach the terminal raw: the REPL driven in line
mode and in a real terminal (tmux) on a scenario whose model text, command lines, tool output, hook
output, suggestion, file name and file content carry OSC 52, OSC 8, CSI clear, title and C1 sequences."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speculate.repl.demo import prepare_project
from speculate.sim.scenario_yaml import load_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).with_name("data") / "terminal-escapes.yaml"
# What a terminal could act on: C0 but \t \n, DEL, C1 (as characters, and as UTF-8-encoded bytes).
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class LineRepl:
    """``speculate repl --plain`` on a pipe, answered line by line as its output asks."""

    def __init__(self, tmp: Path, project: Path, *args: str) -> None:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "SPECULATE_HISTORY": str(tmp / "h")}
        self.p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "speculate.cli",
                "repl",
                str(project),
                "--scenario",
                str(SCENARIO),
                "--time-scale",
                "0.02",
                *args,
            ],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.out = b""
        self.seen = 0  # how far expect() has matched

    def expect(self, *texts: str, timeout: float = 30.0) -> str:
        """Read until one of ``texts`` appears after the last match; returns the output up to its end."""
        start, end, wants = self.seen, time.monotonic() + timeout, [t.encode() for t in texts]
        assert self.p.stdout is not None
        while not any(w in self.out[start:] for w in wants):
            left = end - time.monotonic()
            if left <= 0 or (self.p.poll() is not None and not select.select([self.p.stdout], [], [], 0)[0]):
                raise AssertionError(f"no {texts} in the output: {self.out.decode(errors='replace')[-3000:]}")
            if select.select([self.p.stdout], [], [], left)[0]:
                self.out += os.read(self.p.stdout.fileno(), 65536)
        self.seen = min(self.out.index(w, start) + len(w) for w in wants if w in self.out[start:])
        return self.out[start : self.seen].decode()

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def finish(self) -> str:
        rest, err = self.p.communicate(timeout=60)  # closes stdin: end of input
        self.out += rest
        assert self.p.returncode == 0, err.decode(errors="replace")[-2000:]
        return self.out.decode()


@pytest.mark.slow
def test_line_mode_shows_every_escape_and_interprets_none(tmp_path: Path) -> None:
    project = prepare_project(load_scenario(SCENARIO), tmp_path / "proj")
    r = LineRepl(tmp_path, project)
    try:
        r.expect("[suggestion] show the banner")
        r.send("/accept")
        asked = r.expect("? [y/n/always] ")  # the command line holds a title and an OSC 52 sequence
        assert "allow Bash(echo 'banner ^[]0;cmd-title^G ^[]52;c;Y21k^G' > banner.txt" in asked
        r.send("y")
        r.expect("[suggestion] write the ^[]0;ghost-title^G notes")  # the model's suggestion
        for _ in range(100):  # until the speculation has written its file
            r.send("/diff")
            if "changes nothing" not in r.expect("(the current speculation changes nothing)\n", "+++ b/"):
                break
            time.sleep(0.1)
        r.expect("notes-^[[2J.txt\n")  # the file's name and content in the diff
        r.expect("+^[]52;c;ZmlsZQ==^G^[[2J notes\n")
        r.send("/accept")
        r.expect("speculation accepted")
        r.send("/quit")
        out = r.finish()
    finally:
        if r.p.poll() is None:
            r.p.kill()
            r.p.communicate()
    assert not RAW.search(out), RAW.findall(out)
    for seen in (
        "Clip ^[]52;c;bW9kZWw=^G link ^[]8;;http://evil.example/^[\\here^[]8;;^[\\ clear ^[[2J^[[H "
        "title ^[]0;model-title^G c1 <9b>2J end.",  # the streamed model text
        "banner ^[]0;cmd-title^G ^[]52;c;Y21k^G",  # the failed command's first line, on its tool line
        "PostToolUse hook on Bash: hook says ^[]0;hook-title^G^[]52;c;aG9vaw==^G done",
        "The banner command failed <9d>0;c1-title<9c>.",
        "wrote notes-^[[2J.txt",
    ):  # the accepted line names the file
        assert seen in out, (seen, out)
    assert (project / "notes-\x1b[2J.txt").read_text() == "\x1b]52;c;ZmlsZQ==\x07\x1b[2J notes\n"  # unchanged


@pytest.mark.slow
@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_real_terminal_shows_the_escapes_and_acts_on_none(tmp_path: Path) -> None:
    """In tmux, which acts on what reaches it: a title sequence would rename the pane, an OSC 52 one would
    make a paste buffer (set-clipboard on). Neither may happen; the sequences are on screen as text."""
    from tests.repl.test_tmux import Term

    project = prepare_project(load_scenario(SCENARIO), tmp_path / "proj")
    t = Term()
    try:
        t.start(
            f"SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} -m speculate.cli repl {project} "
            f"--scenario {SCENARIO} --time-scale 0.05; echo EXIT=$?; sleep 60",
            width=160,
        )
        t.tmux("set-option", "-g", "set-clipboard", "on")  # before the REPL has started (a second or more)
        title = t.tmux("display-message", "-p", "-t", t.target, "#{pane_title}")
        t.wait(lambda: "show the banner" in t.input_line(), "the first prompt as ghost text")
        t.keys("Tab", "Enter")
        t.wait(lambda: "allow Bash(" in t.screen(), "the permission prompt")
        t.type("y")
        t.keys("Enter")
        t.wait(
            lambda: "write the ^[]0;ghost-title^G notes" in t.input_line() and "ready (" in t.toolbar(),
            "the model's suggestion as ghost text, its speculation done",
        )
        t.type("/diff")
        t.keys("Enter")
        t.wait(lambda: "+^[]52;c;ZmlsZQ==^G^[[2J notes" in t.scrollback(), "the diff")
        t.keys("Tab", "Enter")
        t.wait(lambda: "speculation accepted" in t.scrollback(), "the acceptance line")
        t.keys("C-d")
        t.wait(lambda: "EXIT=0" in t.scrollback(), "a clean exit")
        screen = t.scrollback()
        assert t.tmux("display-message", "-p", "-t", t.target, "#{pane_title}") == title
        assert t.tmux("list-buffers") == "", "an OSC 52 sequence reached the terminal"
    finally:
        t.close()
    for seen in (
        "Clip ^[]52;c;bW9kZWw=^G link ^[]8;;http://evil.example/^[\\here^[]8;;^[\\ clear ^[[2J^[[H",
        "allow Bash(echo 'banner ^[]0;cmd-title^G ^[]52;c;Y21k^G' > banner.txt",
        "hook says ^[]0;hook-title^G^[]52;c;aG9vaw==^G done",
        "+++ b/notes-^[[2J.txt",
        "wrote notes-^[[2J.txt",
    ):
        assert seen in screen, (seen, screen)
