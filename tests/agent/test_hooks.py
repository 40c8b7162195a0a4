"""Hooks in the main loop: real shell commands from a real .claude/settings.json, sessions on the simulator.

Each hook appends the JSON it read on stdin to a log outside the project, so a test sees what it was sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from speculate.hooks import HookRan
from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer

# Two scenarios: the simulator picks one by the conversation's first prompt.
WRITE = """
name: hooks-write
description: a write, then a read, that the user's hooks see
turns:
  - prompt: "write the secret"
    steps:
      - tools:
          - Write: {file_path: "{root}/secret.txt", content: "s3cret\\n"}
      - text: "Tried to write."
    suggestion: null
  - prompt: "read a"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a says alpha."
    suggestion: null
"""
READ = """
name: hooks-read
description: a read that the user's hooks see
turns:
  - prompt: "read a"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a says alpha."
    suggestion: null
"""


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def project(tmp: Path, hooks: dict[str, list[dict[str, Any]]]) -> tuple[Path, Path]:
    root = tmp / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    return root, tmp / "hook.log"


def command(log: Path, then: str) -> dict[str, Any]:
    """A hook command that logs its stdin (one JSON line) and then runs ``then``."""
    return {"type": "command", "command": f"(cat; echo) >> {log}; {then}"}


@asynccontextmanager
async def session(root: Path, events: list) -> AsyncIterator[tuple[Session, SimServer]]:
    with SimServer([parse_scenario(WRITE), parse_scenario(READ)], time_scale=0.01) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            cfg = SessionConfig(project=root, model=model, speculate=False, mode="acceptEdits")
            async with open_session(cfg, on_event=events.append) as s:
                yield s, sim


def hook_events(events: list) -> list[HookRan]:
    return [e for e in events if isinstance(e, HookRan)]


def test_pre_tool_use_exit_2_refuses_the_call_and_tells_the_model_why(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    root, log = project(tmp_path, {"PreToolUse": [
        {"matcher": "Write|Edit", "hooks": [command(log, 'echo "writes are frozen today" >&2; exit 2')]},
        {"matcher": "Read", "hooks": [command(log, 'echo "read is fine"; test "$CLAUDE_PROJECT_DIR" = "$PWD"')]},
    ]})
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, _):
            await s.submit("write the secret")
            assert not (root / "secret.txt").exists()
            (result,) = s.messages[2]["content"]
            assert result["is_error"] and "writes are frozen today" in result["content"]
            await s.submit("read a")  # the Read hook allows (exit 0): the call runs
            assert "alpha" in s.messages[-2]["content"][0]["content"]

    trio.run(main)
    sent = logged(log)
    assert [e["tool_name"] for e in sent] == ["Write", "Read"]
    write = sent[0]
    assert write["hook_event_name"] == "PreToolUse" and write["cwd"] == str(root.resolve())
    assert write["tool_input"] == {"file_path": f"{root.resolve()}/secret.txt", "content": "s3cret\n"}
    assert write["tool_use_id"].startswith("toolu_") and write["permission_mode"] == "acceptEdits"
    assert write["session_id"] and write["session_id"] == sent[1]["session_id"]
    ran = hook_events(events)
    assert [(r.event, r.exit_code, r.blocked) for r in ran] == [("PreToolUse", 2, True), ("PreToolUse", 0, False)]
    assert ran[1].stdout.strip() == "read is fine"  # shown to the user by the REPL


def test_post_tool_use_feedback_warnings_and_timeouts(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    root, log = project(tmp_path, {"PostToolUse": [
        {"matcher": "Read", "hooks": [
            command(log, 'echo "a.txt is generated: edit a.in instead" >&2; exit 2'),
            command(log, "echo broken >&2; exit 1"),
            {"type": "command", "command": "sleep 5", "timeout": 0.3},
        ]},
        {"matcher": "Write", "hooks": [command(log, "exit 0")]},
    ]})
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, _):
            await s.submit("read a")
            result = s.messages[2]["content"][0]
            assert not result.get("is_error")  # the call ran; feedback is added to its result
            assert result["content"].startswith("     1\talpha")
            assert result["content"].endswith("PostToolUse hook feedback: a.txt is generated: edit a.in instead")

    trio.run(main)
    ran = hook_events(events)
    assert [(r.blocked, r.failed, r.timed_out) for r in ran] == [
        (True, False, False), (False, True, False), (False, True, True)]  # exit 2, exit 1, killed at 0.3 s
    assert ran[1].stderr.strip() == "broken"
    (sent,) = logged(log)[:1]
    assert sent["hook_event_name"] == "PostToolUse" and "alpha" in sent["tool_response"]["content"]


def test_user_prompt_submit_adds_context_or_blocks_the_prompt(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    root, log = project(tmp_path, {"UserPromptSubmit": [{"hooks": [command(
        log, 'if grep -q secret "' + str(log) + '"; then echo "no secrets here" >&2; exit 2; fi; '
             'echo "branch: main"')]}]})
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, sim):
            out = await s.submit("read a")
            assert not out.blocked
            assert [b["text"] for b in s.messages[0]["content"]] == ["read a", "branch: main"]
            before, requests = len(s.messages), sim.statistics().engine.requests
            out = await s.submit("write the secret")
            assert out.blocked == "no secrets here" and out.result is None
            assert len(s.messages) == before and sim.statistics().engine.requests == requests  # nothing sent
            assert not (root / "secret.txt").exists()

    trio.run(main)
    assert [e["prompt"] for e in logged(log)] == ["read a", "write the secret"]


def test_stop_hook_exit_2_keeps_the_turn_going_once(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    # Refuses to stop unless it already did once in this turn (stop_hook_active), as hook authors must.
    root, log = project(tmp_path, {"Stop": [{"hooks": [command(
        log, 'tail -n 1 "' + str(log) + '" | grep -q \'"stop_hook_active": true\' && exit 0; '
             'echo "run the tests before you stop" >&2; exit 2')]}]})

    async def main() -> None:
        async with session(root, []) as (s, _):
            out = await s.submit("read a")
            assert out.result is not None and len(out.result.responses) == 3  # tool call, answer, one more
            texts = [b.get("text") for m in s.messages for b in m["content"] if m["role"] == "user"]
            assert "Stop hook feedback: run the tests before you stop" in texts

    trio.run(main)
    assert [e["stop_hook_active"] for e in logged(log)] == [False, True]
