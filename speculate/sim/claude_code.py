"""Driving the real Claude Code CLI against the simulator: one turn per process, ``-c`` for the next ones.

``scripts/setup.sh`` installs the CLI into ``.venv/claude-code`` (the npm package, else the binary bundled in
the ``claude-agent-sdk`` wheel); :meth:`ClaudeCode.locate` finds it or says why it is missing. Each turn runs
``claude -p --output-format stream-json --verbose --prompt-suggestions`` in the project with a scratch
``HOME``, the simulator as ``ANTHROPIC_BASE_URL``, telemetry and non-essential traffic off. As root Claude
Code refuses ``bypassPermissions``, so edits are accepted (``acceptEdits``) and the file and shell tools are
allowed by name. Used by tests/sim/test_claude_code.py and the client benchmark (bench/clients.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculate import CHECKOUT

INSTALL_DIR = CHECKOUT / ".venv" / "claude-code"
CANDIDATES = (
    "node_modules/@anthropic-ai/claude-code-linux-x64/claude",  # npm package
    "sdk/claude_agent_sdk/_bundled/claude",  # claude-agent-sdk wheel
)
ALLOWED_TOOLS = "Bash,Read,Edit,Write,Glob,Grep"


@dataclass
class Turn:
    """What one ``claude -p`` run printed (stream-json events) and how it ended."""

    events: list[dict[str, Any]]
    returncode: int
    stderr: str
    wall_s: float

    def _blocks(self, role: str, kind: str) -> list[dict[str, Any]]:
        return [
            b
            for e in self.events
            if e.get("type") == role
            for b in (e.get("message") or {}).get("content") or []
            if isinstance(b, dict) and b.get("type") == kind
        ]

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return self._blocks("assistant", "tool_use")

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        return self._blocks("user", "tool_result")

    @property
    def result(self) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("type") == "result"), None)

    @property
    def text(self) -> str | None:
        result = self.result
        return None if result is None else result.get("result")

    @property
    def suggestion(self) -> str | None:
        return next((e.get("suggestion") for e in self.events if e.get("type") == "prompt_suggestion"), None)


@dataclass(frozen=True)
class ClaudeCode:
    binary: Path
    home: Path  # a scratch HOME: sessions, settings and the project's memory live there
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def locate() -> Path | str:
        """The installed binary, or why there is none (``SPECULATE_CLAUDE_CODE`` overrides the path)."""
        override = os.environ.get("SPECULATE_CLAUDE_CODE")
        if override:
            return (
                Path(override)
                if Path(override).is_file()
                else f"SPECULATE_CLAUDE_CODE={override} is not a file"
            )
        for rel in CANDIDATES:
            if (INSTALL_DIR / rel).is_file():
                return INSTALL_DIR / rel
        why = INSTALL_DIR / "UNAVAILABLE"
        if why.is_file():
            return f"the Claude Code CLI could not be installed: {why.read_text().strip()}"
        return f"the Claude Code CLI is not installed in {INSTALL_DIR}: run bash scripts/setup.sh"

    def version(self) -> str:
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.strip()

    def env(self, base_url: str) -> dict[str, str]:
        python_bin = str(Path(sys.executable).parent)  # `python` in a scripted command: one with pytest
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "PYTEST_"))}
        env.update(
            HOME=str(self.home),
            PATH=f"{python_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            PYTHONPATH="",
            ANTHROPIC_BASE_URL=base_url,
            ANTHROPIC_API_KEY="sim",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        env.update(self.extra_env)
        return env

    def turn(
        self, prompt: str, *, project: Path, base_url: str, resume: bool, timeout_s: float = 120.0
    ) -> Turn:
        """One turn: a new conversation, or (``resume``) the next turn of the last one in ``project``."""
        self.home.mkdir(parents=True, exist_ok=True)
        args = [str(self.binary), "-p", "--output-format", "stream-json", "--verbose", "--prompt-suggestions",
                "--permission-mode", "acceptEdits", "--allowedTools", ALLOWED_TOOLS]  # fmt: skip
        if resume:
            args.append("-c")
        t0 = time.perf_counter()
        proc = subprocess.run([*args, "--", prompt], cwd=project, env=self.env(base_url), capture_output=True,
                              text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)  # fmt: skip
        wall = time.perf_counter() - t0
        events = []
        for line in proc.stdout.splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line that is not an event (should not happen with stream-json)
        return Turn(events, proc.returncode, proc.stderr, wall)
