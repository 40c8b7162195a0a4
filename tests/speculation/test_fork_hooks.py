"""The user's hooks, and instructions files, inside a speculative fork: a hook runs in the sandbox against
the overlay (nothing it writes reaches the host before acceptance), or where there is no sandbox it is a
``hook`` boundary; a fork that would write CLAUDE.md stops at ``instructions``. A hook that cannot run in
the sandbox, times out or fails stops the fork (fail closed); scripts in the home and the project run."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.events import read_records
from speculate.speculation.sandbox_shell import bash_sandbox

from .conftest import make_project, tree_hash

# Turn 1 reads (so that a suggestion follows); the suggestion's turn makes the call under test.
FORKED = """
name: fork-{name}
description: a forked turn that makes one call
turns:
  - prompt: "prepare {name}"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/b.txt"}}
      - text: "Ready."
    suggestion: "{name}"
  - prompt: "{name}"
    steps:
      - tools:
          - {call}
      - text: "Done."
    suggestion: null
"""
CALLS = {
    "edit a": 'Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "gamma"}',
    "write instructions": 'Write: {file_path: "{root}/CLAUDE.md", content: "Always use tabs.\\n"}',
    "append instructions": 'Bash: {command: "echo Always use tabs. >> CLAUDE.md"}',
}


@asynccontextmanager
async def spec_session(root: Path, **cfg: Any) -> AsyncIterator[Session]:
    scenarios = [parse_scenario(FORKED.format(name=n, call=c)) for n, c in CALLS.items()]
    with SimServer(scenarios, time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(project=root, model=model, events_path=root.parent / "events.jsonl", **cfg)
            async with open_session(config) as s:
                yield s


def settings(root: Path, hooks: dict[str, Any]) -> None:
    (root / ".claude").mkdir(exist_ok=True)
    (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))


def hook(command: str, matcher: str = "Edit") -> list[dict[str, Any]]:
    return [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]


async def speculate(s: Session, name: str) -> Any:
    await s.submit(f"prepare {name}")
    assert await s.wait_suggestion() == name
    await s.wait_speculation()
    return s.engine._spec


@pytest.fixture
def canary() -> Any:
    """Host places a hook in a fork tries to write: a directory under /var/lib, /etc and the home."""
    if not os.access("/var/lib", os.W_OK):
        pytest.skip("the canaries under /var/lib and /etc need root (CI runs as root)")
    d = Path(f"/var/lib/speculate-hook-canary-{os.getpid()}")
    d.mkdir(exist_ok=True)
    (d / "existing").write_text("untouched\n")
    etc, home = (
        Path(f"/etc/speculate-hook-canary-{os.getpid()}"),
        Path.home() / f".speculate-canary-{os.getpid()}",
    )
    yield d, etc, home
    shutil.rmtree(d, ignore_errors=True)
    for p in (etc, home):
        p.unlink(missing_ok=True)


def test_a_hook_runs_in_the_sandbox_against_the_overlay(tmp_path: Path, canary: Any) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    d, etc, home = canary
    root = make_project(tmp_path)
    escape = (
        f"echo pwned > {d}/new; echo pwned >> {d}/existing; echo pwned > {etc}; echo pwned > {home}; "
        f"touch /tmp/speculate-hook-canary-{os.getpid()}"
    )
    settings(
        root,
        {
            "PreToolUse": [
                {
                    "matcher": "Edit",
                    "hooks": [
                        {
                            "type": "command",
                            "command": f'cat > "$CLAUDE_PROJECT_DIR/hook-saw.json"; '
                            f'({escape}) 2> "$CLAUDE_PROJECT_DIR/escape.err"; exit 0',
                        },
                        {"type": "command", "command": "echo 'a.txt is frozen' >&2; exit 2"},
                    ],
                }
            ]
        },
    )
    before, canary_before = tree_hash(root), tree_hash(d)

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, "edit a")
            rec = spec.record
            assert rec.boundary == "complete" and rec.hooks_run == 2
            # The denial inside the fork behaves as in the main loop: the call did not run, the model saw why.
            assert rec.hook_denials == ["Edit: a.txt is frozen"]
            result = spec.agent.messages[-2]["content"][0]
            assert result["is_error"] and "a.txt is frozen" in result["content"]
            assert spec.overlay.read_text("a.txt") == "alpha\n"
            # What the hook wrote into the project is in the overlay only; its JSON named the call.
            saw = json.loads(spec.overlay.read_text("hook-saw.json"))
            assert saw["hook_event_name"] == "PreToolUse" and saw["tool_name"] == "Edit"
            assert saw["cwd"] == str(root.resolve())
            # The hook did try (each write outside the project failed in the sandbox)...
            assert spec.overlay.read_text("escape.err").count("Read-only file system") == 4
            # ...and nothing reached the host: the real tree, the canary directory, /etc, the home, /tmp.
            assert tree_hash(root) == before and tree_hash(d) == canary_before
            assert not etc.exists() and not home.exists()
            assert not Path(f"/tmp/speculate-hook-canary-{os.getpid()}").exists()
            out = await s.submit("edit a")  # accepted: the hook's file in the project is promoted with it
            assert out.accepted and json.loads((root / "hook-saw.json").read_text())["tool_name"] == "Edit"

    trio.run(main)


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse"])
def test_without_a_sandbox_a_call_with_a_hook_is_a_boundary(tmp_path: Path, event: str) -> None:
    root = make_project(tmp_path)
    settings(root, {event: hook('touch "$CLAUDE_PROJECT_DIR/hook-ran"')})
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root, overlay_backend="pure") as s:
            spec = await speculate(s, "edit a")
            rec = spec.record
            assert rec.boundary == "hook" and f"{event} hook `touch" in rec.boundary_detail
            assert "on Edit" in rec.boundary_detail and "speculative Bash is off" not in rec.boundary_detail
            assert spec.tools_run == 0 and rec.hooks_run == 0  # stopped before the call: nothing ran
            assert tree_hash(root) == before and not spec.overlay.exists("hook-ran")
            out = await s.submit("edit a")  # accepted: the normal loop makes the call, and runs the hook
            assert out.accepted and (root / "hook-ran").exists() and (root / "a.txt").read_text() == "gamma\n"

    trio.run(main)


def test_without_a_sandbox_a_prompt_hook_stops_the_fork_before_its_prompt(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    # Context for the forked prompt only (the simulator matches turn 1 by its exact text).
    settings(
        root,
        {
            "UserPromptSubmit": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": 'grep -q \'"prompt": "edit a"\' && echo context || true',
                        }
                    ]
                }
            ]
        },
    )

    async def main() -> None:
        async with spec_session(root, overlay_backend="pure") as s:
            spec = await speculate(s, "edit a")
            assert spec.record.boundary == "hook" and "UserPromptSubmit hook" in spec.record.boundary_detail
            assert spec.overlay is None  # nothing was done: nothing to promote or inject
            n = len(s.messages)
            out = await s.submit("edit a")  # runs as a normal turn, prompt hook included
            assert not out.accepted and out.result is not None
            assert [b["text"] for b in s.messages[n]["content"]] == [
                "edit a",
                "<system-reminder>\nUserPromptSubmit hook success: context\n</system-reminder>",
            ]

    trio.run(main)


def test_without_a_sandbox_a_stop_hook_stops_the_fork_at_the_end_of_its_turn(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    settings(
        root,
        {"Stop": [{"hooks": [{"type": "command", "command": 'echo stop >> "$CLAUDE_PROJECT_DIR/stops"'}]}]},
    )

    async def main() -> None:
        async with spec_session(root, overlay_backend="pure") as s:
            spec = await speculate(s, "edit a")
            assert (root / "stops").read_text() == "stop\n"  # the main loop's turn 1, on the host
            assert spec.record.boundary == "hook" and "Stop hook `echo stop" in spec.record.boundary_detail
            assert spec.tools_run == 1 and spec.overlay.read_text("a.txt") == "gamma\n"
            assert spec.overlay.read_text("stops") == "stop\n"  # the fork's Stop hook did not run
            out = await s.submit(
                "edit a"
            )  # the edit is promoted; the normal loop ends the turn, hook and all
            assert out.accepted and (root / "a.txt").read_text() == "gamma\n"
            assert (root / "stops").read_text() == "stop\nstop\n"

    trio.run(main)


def test_a_fork_that_would_write_instructions_stops_before_the_write(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, "write instructions")
            assert spec.record.boundary == "instructions" and "CLAUDE.md" in spec.record.boundary_detail
            assert spec.tools_run == 0 and not spec.overlay.exists("CLAUDE.md")
            assert tree_hash(root) == before

    trio.run(main)


def test_a_sandboxed_command_that_writes_instructions_stops_the_fork_before_it(
    tmp_path: Path,
) -> None:
    """The parser sees the redirection into CLAUDE.md: the fork stops before the command (#36 item 3), and
    accepting runs it live."""
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            spec = await speculate(s, "append instructions")
            rec = spec.record
            assert rec.boundary == "instructions" and "writes CLAUDE.md" in rec.boundary_detail, rec
            assert spec.tools_run == 0 and spec.overlay.changes() == [] and tree_hash(root) == before
            out = await s.submit("append instructions")  # accepted: the command runs live, on the real tree
            assert out.accepted and (root / "CLAUDE.md").read_text() == "Always use tabs.\n"
            await s.submit("prepare edit a")
            assert "Always use tabs." in s.key.system[1]

    trio.run(main)


FAILING = {
    # The script lives under /tmp, outside the project: the sandbox's private /tmp hides it (exit 127).
    "outside": ("{script}", None, "exited 127", "No such file or directory"),
    "hangs": ("sleep 30", 0.5, "timed out", ""),
    "exits 1": ("echo 'the linter broke' >&2; exit 1", None, "exited 1", "the linter broke"),
}


@pytest.mark.parametrize("case", FAILING)
def test_a_hook_that_fails_in_the_fork_stops_it_and_nothing_it_refused_lands(
    tmp_path: Path, case: str
) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    root = make_project(tmp_path)
    script = tmp_path / "hooks" / "deny.sh"  # the hook refuses every Edit: on the host it can
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho 'a.txt is frozen' >&2\nexit 2\n")
    script.chmod(0o755)
    command, timeout, how, stderr = FAILING[case]
    entry: dict[str, Any] = {"type": "command", "command": command.format(script=script)}
    if timeout is not None:
        entry["timeout"] = timeout
    settings(root, {"PreToolUse": [{"matcher": "Edit", "hooks": [entry]}]})
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, "edit a")
            rec = spec.record
            assert rec.boundary == "hook" and how in rec.boundary_detail and stderr in rec.boundary_detail, (
                rec
            )
            assert f"PreToolUse hook `{entry['command']}` on Edit" in rec.boundary_detail
            assert len(rec.hook_errors) == 1 and stderr in rec.hook_errors[0]
            assert spec.overlay is None and spec.tools_run == 0  # discarded; the Edit never ran
            assert tree_hash(root) == before
            out = await s.submit("edit a")  # the turn runs live: the hook decides on the host, as typed
            assert not out.accepted and out.result is not None

    trio.run(main)
    # Live, the /tmp hook refuses the edit; a hook that hangs or exits 1 is a warning there (Claude Code's rule).
    assert (root / "a.txt").read_text() == ("alpha\n" if case == "outside" else "gamma\n")
    rec = [r for r in read_records(root.parent / "events.jsonl") if r.kind == "speculation"][-1]
    assert rec.outcome == "aborted" and rec.boundary == "hook"


def test_hook_scripts_under_the_home_and_the_project_run_in_the_fork(tmp_path: Path) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    root = make_project(tmp_path)
    (root / ".claude" / "hooks").mkdir(parents=True)
    mine = root / ".claude" / "hooks" / "mark.sh"
    mine.write_text('#!/bin/sh\necho ran > "$CLAUDE_PROJECT_DIR/hook-ran"\n')
    home = Path.home() / f".speculate-hook-test-{os.getpid()}.sh"
    home.write_text("#!/bin/sh\necho 'frozen by the home hook' >&2\nexit 2\n")
    for p in (mine, home):
        p.chmod(0o755)
    settings(
        root,
        {
            "PreToolUse": [
                {
                    "matcher": "Edit",
                    "hooks": [
                        {"type": "command", "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/mark.sh'},
                        {"type": "command", "command": str(home)},
                    ],
                }
            ]
        },
    )

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, "edit a")
            rec = spec.record
            assert rec.boundary == "complete" and rec.hook_errors == [], rec
            assert rec.hooks_run == 2 and rec.hook_denials == ["Edit: frozen by the home hook"]
            assert (
                spec.overlay.read_text("hook-ran") == "ran\n" and spec.overlay.read_text("a.txt") == "alpha\n"
            )

    try:
        trio.run(main)
    finally:
        home.unlink()
