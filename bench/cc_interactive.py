"""Claude Code's interactive terminal UI, driven through a private tmux server against the simulator.

A person's session, played by a script: wait for the answer to end (Claude Code writes a ``turn_duration``
record to the session transcript), wait for the ghost suggestion, pause (the think time), then take the
suggestion with Tab and Enter or type the prompt. Prompt suggestions are switched on with
``CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION=1`` (otherwise a server-side flag decides); onboarding, the API key
and the project's trust dialog are pre-answered in the scratch ``HOME``'s ``.claude.json``. What Claude Code
records this way, ``promptSource: suggestion_accepted`` on a prompt taken with Tab, is what
``speculate import claude-code`` reads as the user's real acceptance. Used by tests/importers and
bench/transcript_figures.py.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from speculate.errors import SpeculateError
from speculate.sim.claude_code import ALLOWED_TOOLS, ClaudeCode

PROMPT_MARK = "\u276f"  # the input line's marker


class DriveError(SpeculateError, RuntimeError):
    """The terminal did not get where the script waited for it to go (with the screen, for the reason)."""


@dataclass
class Interactive:
    cc: ClaudeCode
    project: Path
    base_url: str
    width: int = 160
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.earlier: set[Path] = set()
        self.dir = Path(tempfile.mkdtemp(prefix="cc-tmux-"))  # short: a socket path is limited to ~100 bytes
        self.socket = str(self.dir / "sock")

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", self.socket, "-f", "/dev/null", *args], check=True, capture_output=True, text=True
        ).stdout

    def start(self) -> None:
        home = self.cc.home
        home.mkdir(parents=True, exist_ok=True)
        project = str(self.project.resolve())
        (home / ".claude.json").write_text(
            json.dumps(
                {
                    "hasCompletedOnboarding": True,
                    "theme": "dark",
                    "customApiKeyResponses": {"approved": ["sim"], "rejected": []},
                    "projects": {project: {"hasTrustDialogAccepted": True, "allowedTools": []}},
                }
            )
        )
        env = {
            **self.cc.env(self.base_url),
            "TERM": "xterm-256color",
            "CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "1",
            **self.extra_env,
        }
        argv = [str(self.cc.binary), "--permission-mode", "acceptEdits", "--allowedTools", ALLOWED_TOOLS]
        launcher = self.dir / "run.sh"
        launcher.write_text(
            "#!/bin/sh\ncd "
            + shlex.quote(project)
            + " || exit 1\nexec env -i "
            + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            + " "
            + " ".join(map(shlex.quote, argv))
            + "\n"
        )
        launcher.chmod(0o755)
        self.earlier = set(self._sessions())  # a HOME shared by several sessions: this one's file is new
        self.tmux("new-session", "-d", "-x", str(self.width), "-y", "50", "-s", "cc", str(launcher))
        self.wait(lambda: self.input_line() is not None, "the input prompt", 60)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def screen(self) -> str:
        try:
            return self.tmux("capture-pane", "-p", "-t", "cc")
        except subprocess.CalledProcessError:
            return ""  # the pane is gone (Claude Code exited)

    def input_line(self) -> str | None:
        """What the input box shows (typed text or the ghost suggestion), None while there is no input box."""
        lines = [ln for ln in self.screen().splitlines() if ln.startswith(PROMPT_MARK)]
        return lines[-1][len(PROMPT_MARK) :].strip() if lines else None

    def _sessions(self) -> list[Path]:
        return list((self.cc.home / ".claude" / "projects").glob("*/*.jsonl"))

    def transcript(self) -> Path | None:
        """This session's transcript (the newest file that was not there when it started)."""
        found = sorted(
            (p for p in self._sessions() if p not in self.earlier), key=lambda p: p.stat().st_mtime
        )
        return found[-1] if found else None

    def turns_done(self) -> int:
        path = self.transcript()
        if path is None:
            return 0
        n = 0
        for line in path.read_text(encoding="utf-8").splitlines():
            if '"turn_duration"' in line:
                n += json.loads(line).get("subtype") == "turn_duration"
        return n

    def wait(self, cond: Callable[[], bool], what: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                raise DriveError(
                    f"timed out after {timeout:g} s waiting for {what}; screen:\n{self.screen()}"
                )
            time.sleep(0.1)

    def send(self, prompt: str, *, tab: bool) -> None:
        """Submit ``prompt``: with Tab (it is the ghost suggestion on screen) or typed."""
        if tab:
            self.tmux("send-keys", "-t", "cc", "Tab")
        else:
            self.tmux("send-keys", "-t", "cc", "-l", prompt)
        self.wait(lambda: self.input_line() == prompt.strip(), f"the input to read {prompt!r}", 10)
        self.tmux("send-keys", "-t", "cc", "Enter")

    def turn(
        self,
        prompt: str,
        *,
        take: bool,
        pause_s: float,
        timeout_s: float = 120.0,
        suggestion_wait_s: float = 15.0,
    ) -> str | None:
        """One turn after the previous one ended: wait for the suggestion, pause, submit ``prompt`` (with Tab
        when ``take`` and the suggestion is ``prompt``), wait for the answer to end. Returns the suggestion
        that was on screen (None if none came)."""
        done = self.turns_done()
        shown: str | None = None
        end = time.monotonic() + suggestion_wait_s
        while time.monotonic() < end and done > 0:
            line = self.input_line() or ""
            if line and not line.startswith("Try "):
                shown = line
                break
            time.sleep(0.1)
        time.sleep(pause_s)
        self.send(prompt, tab=take and shown == prompt.strip())
        self.wait(lambda: self.turns_done() > done, f"the answer to {prompt!r}", timeout_s)
        return shown
