"""Driving the REPL in a real terminal for the tmux tests (tests/repl/test_tmux*.py): a private tmux server
running one session (keys, typed text, the screen, waiting for it), the command that starts the REPL on
the demo scenario, its two prompts, and the canary hash of a project tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.workspace import manifest
from bench.workspace import tree_hash as canary_hash

REPO = Path(__file__).resolve().parents[2]
P1 = "why does page 2 of the product list repeat the last item of page 1?"
P2 = "fix it and add a regression test"
FINISHED = ("ready (", "stopped at boundary")
PANE_SHELL = shutil.which("bash") or "/bin/sh"


def tree_hash(root: Path) -> str:
    return canary_hash(manifest(root))


class Term:
    """A private tmux server (its own socket, no user config) running one session."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="sp-tmux-"))  # short: socket paths are limited to ~100 bytes
        self.socket = str(self.dir / "sock")
        self.target = "repl"

    def tmux(self, *args: str) -> str:
        # The pane runs its command through $SHELL, else the login shell (nologin for a service account).
        return subprocess.run(
            ["tmux", "-S", self.socket, "-f", "/dev/null", *args],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "SHELL": PANE_SHELL},
        ).stdout

    def start(self, cmd: str, width: int = 120) -> None:
        self.tmux("new-session", "-d", "-x", str(width), "-y", "40", "-s", self.target, "-c", str(REPO), cmd)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.target, *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.target, "-l", text)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.target)

    def scrollback(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.target)

    def toolbar(self) -> str:
        lines = [ln for ln in self.screen().splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    def input_line(self) -> str:
        lines = [ln for ln in self.screen().splitlines() if ln.startswith("› ")]
        return lines[-1] if lines else ""

    def wait(self, cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{self.scrollback()}")
            time.sleep(0.05)

    def answer_until(self, cond: Callable[[], bool], what: str, timeout: float = 30.0) -> list[str]:
        """Wait for ``cond``, answering y to each question that comes up on the way; the questions."""
        asked: list[str] = []
        end = time.monotonic() + timeout
        while not cond():
            text = self.scrollback()
            answered = text.count("[y/n/always] y")
            if text.count("[y/n/always]") > answered:
                asked.append(text.rsplit("[y/n/always]", 1)[0].splitlines()[-1].strip())
                self.type("y")
                self.keys("Enter")
                self.wait(
                    lambda n=answered: self.scrollback().count("[y/n/always] y") > n, "the answer taken"
                )
                continue
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{self.scrollback()}")
            time.sleep(0.05)
        return asked


def repl_command(tmp_path: Path, project: Path, *, time_scale: float) -> str:
    # The shell stays after the REPL exits so its exit status can be read off the screen.
    return (
        f"SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} -m speculate.cli repl {project} "
        f"--scenario fix-pagination --time-scale {time_scale}; echo EXIT=$?; sleep 60"
    )


def start_repl(tmp_path: Path, project: Path, *, time_scale: float, extra: str = "") -> Term:
    t = Term()
    cmd = repl_command(tmp_path, project, time_scale=time_scale)
    t.start(cmd.replace(f"--time-scale {time_scale}", f"--time-scale {time_scale} {extra}"))
    return t
