"""Shared by the hook tests: projects with a real .claude/settings.json, hook commands that log their
stdin, and sessions on the embedded simulator over a few small scenarios (picked by their first prompt)."""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from speculate.hooks import HookRan
from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer


def one_call(prompt: str, call: str, answer: str = "Done.") -> str:
    return f"""
name: {prompt.replace(" ", "-")}
turns:
  - prompt: "{prompt}"
    steps:
      - tools:
          - {call}
      - text: "{answer}"
    suggestion: null
  - prompt: "and then?"
    steps:
      - text: "Nothing more."
    suggestion: null
"""


SCENARIOS = [
    one_call(p, c)
    for p, c in {
        "edit a": 'Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "gamma"}',
        "write the secret": 'Write: {file_path: "{root}/secret.txt", content: "s3cret\\n"}',
        "read a": 'Read: {file_path: "{root}/a.txt"}',
        "run echo": 'Bash: {command: "echo one"}',
        "run false": 'Bash: {command: "echo nope && false"}',  # runs unasked: `exit` is asked about
        "glob txt": 'Glob: {pattern: "*.txt"}',
    }.items()
]
LOOK = """
name: look-around
turns:
  - prompt: "look around"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
          - Glob: {pattern: "*.txt"}
          - Grep: {pattern: "alpha"}
      - tools:
          - Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "gamma"}
      - tools:
          - Write: {file_path: "{root}/b.txt", content: "beta\\n"}
      - tools:
          - Bash: {command: "echo out; echo err >&2"}
      - text: "Looked."
    suggestion: null
"""
AskFn = Callable[[str, str], Awaitable[Any]]


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def project(tmp: Path, hooks: dict[str, list[dict[str, Any]]], **settings: Any) -> tuple[Path, Path]:
    root = tmp / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks, **settings}))
    return root, tmp / "hook.log"


def command(log: Path, then: str) -> dict[str, Any]:
    """A hook command that logs its stdin (one JSON line, in one write: hooks run in parallel) and then runs
    ``then``."""
    return {"type": "command", "command": f"printf '%s\\n' \"$(cat)\" >> {log}; {then}"}


def prints(obj: Any, *, code: int = 0, err: str = "") -> str:
    """Shell that prints ``obj`` as JSON on stdout (and ``err`` on stderr) and exits ``code``."""
    out = f"printf '%s' {shlex.quote(json.dumps(obj))}" + (
        f"; printf '%s' {shlex.quote(err)} >&2" if err else ""
    )
    return f"{out}; exit {code}"


def pre(**fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **fields}}


def on(event: str, *hooks: dict[str, Any], matcher: str = "") -> dict[str, list[dict[str, Any]]]:
    return {event: [{"matcher": matcher, "hooks": list(hooks)}]}


@asynccontextmanager
async def session(
    root: Path, events: list, *, mode: str = "acceptEdits", ask: AskFn | None = None, **cfg: Any
) -> AsyncIterator[tuple[Session, SimServer]]:
    scenarios = [parse_scenario(s) for s in [*SCENARIOS, LOOK]]
    with SimServer(scenarios, time_scale=0.01) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(
                project=root,
                model=model,
                speculate=False,
                mode=mode,  # type: ignore[arg-type]
                hook_transcript_dir=root.parent / "transcripts",
                **cfg,
            )
            async with open_session(config, on_event=events.append, ask=ask) as s:
                yield s, sim


def hook_events(events: list) -> list[HookRan]:
    return [e for e in events if isinstance(e, HookRan)]


def reminders(message: dict[str, Any]) -> list[str]:
    """The system-reminder blocks of a user message, without their tags."""
    return [
        b["text"].removeprefix("<system-reminder>\n").removesuffix("\n</system-reminder>")
        for b in message["content"]
        if b.get("type") == "text" and b["text"].startswith("<system-reminder>")
    ]
