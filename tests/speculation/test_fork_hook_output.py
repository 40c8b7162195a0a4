"""Hook JSON output inside a speculative fork: a PreToolUse ``ask`` is a gate ``ask`` (a sandboxed command's
approval on acceptance, a boundary before an edit), ``deny`` refuses as live, ``updatedInput`` is what the fork
classifies and gates, and output the fork cannot read, or ``continue: false``, stops it with its overlay
discarded (fail closed). A fork's hooks read a transcript of the fork's own conversation."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.approvals import PendingApproval
from speculate.speculation.sandbox_shell import bash_sandbox

from .conftest import make_project, tree_hash

FORKED = """
name: fork-{name}
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
    "run echo": 'Bash: {command: "echo one"}',
}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _sandbox() -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")


def settings(root: Path, matcher: str, command: str) -> None:
    (root / ".claude").mkdir(exist_ok=True)
    (root / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]
                }
            }
        )
    )


def prints(obj: Any) -> str:
    return f"printf '%s' {shlex.quote(json.dumps(obj))}"


def pre(**fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **fields}}


@asynccontextmanager
async def spec_session(
    root: Path, *, approve: Any = None, ask: Any = None, **cfg: Any
) -> AsyncIterator[Session]:
    scenarios = [parse_scenario(FORKED.format(name=n, call=c)) for n, c in CALLS.items()]
    with SimServer(scenarios, time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(project=root, model=model, events_path=root.parent / "events.jsonl", **cfg)
            async with open_session(config, approve=approve, ask=ask) as s:
                yield s


async def speculate(s: Session, name: str) -> Any:
    await s.submit(f"prepare {name}")
    assert await s.wait_suggestion() == name
    await s.wait_speculation()
    return s.engine._spec


def test_ask_on_a_sandboxed_command_is_asked_on_acceptance(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    settings(root, "Bash", prints(pre(permissionDecision="ask", permissionDecisionReason="echo is loud")))
    shown: list[Sequence[PendingApproval]] = []

    async def approve(pending: Sequence[PendingApproval]) -> Any:
        shown.append(pending)
        return "n"

    async def ask(tool: str, summary: str) -> Any:
        return "n"

    async def main() -> None:
        async with spec_session(root, approve=approve, ask=ask) as s:  # acceptEdits: echo would not ask
            spec = await speculate(s, "run echo")
            assert spec.record.boundary == "complete"
            (p,) = spec.approvals.pending
            assert p.summary == "Bash(echo one)" and "echo is loud" in p.reason
            out = await s.submit("run echo")  # no: discarded, and the live turn asks again (and is told no)
            assert not out.accepted and len(shown) == 1
            result = s.messages[-2]["content"][0]
            assert result["content"] == "Permission denied: the user declined this call"

    trio.run(main)


@pytest.mark.parametrize("decision", ["ask", "deny"])
def test_ask_before_an_edit_is_an_edit_boundary_and_deny_refuses_as_live(
    tmp_path: Path, decision: str
) -> None:
    root = make_project(tmp_path)
    settings(
        root, "Edit", prints(pre(permissionDecision=decision, permissionDecisionReason="a.txt is frozen"))
    )

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, "edit a")
            rec = spec.record
            if decision == "ask":  # as a gate ask before an edit: the fork stops before it
                assert (
                    rec.boundary == "edit"
                    and "a PreToolUse hook asks (a.txt is frozen)" in rec.boundary_detail
                )
                assert spec.tools_run == 0
            else:  # as live: the call is refused, the model is told, the fork goes on
                assert rec.boundary == "complete" and rec.hook_denials == ["Edit: a.txt is frozen"]
                assert spec.overlay.read_text("a.txt") == "alpha\n"

    trio.run(main)


def test_updated_input_is_what_the_fork_classifies_and_gates(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    # touch alone runs without asking in acceptEdits (as in Claude Code 2.1.332); chmod is asked about.
    cmd = "touch made-by-hook.txt && chmod 600 made-by-hook.txt"
    settings(root, "Bash", prints(pre(updatedInput={"command": cmd})))

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, "run echo")
            # echo would not be asked about in acceptEdits; the command the hook substituted writes, so it is.
            (p,) = spec.approvals.pending
            assert p.summary == f"Bash({cmd})" and p.files.words() == "wrote made-by-hook.txt"
            assert spec.overlay.exists("made-by-hook.txt") and not (root / "made-by-hook.txt").exists()

    trio.run(main)


@pytest.mark.parametrize(
    "output, words",
    [
        ("{not json", "starts like JSON but is not"),
        (
            json.dumps({**pre(permissionDecision="allow"), "bogus": 1}),
            "bogus: not a field of PreToolUse's output",
        ),
        (json.dumps(pre(permissionDecision="maybe")), "permissionDecision: Input should be"),
        (
            json.dumps({"continue": False, "stopReason": "enough"}),
            "stopped the turn (continue: false): enough",
        ),
    ],
)
def test_output_the_fork_cannot_follow_stops_it_and_its_overlay_goes(
    tmp_path: Path, output: str, words: str
) -> None:
    root = make_project(tmp_path)
    settings(
        root, "Edit", f"echo run > \"$CLAUDE_PROJECT_DIR/hook-wrote\"; printf '%s' {shlex.quote(output)}"
    )
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, "edit a")
            rec = spec.record
            assert rec.boundary == "hook" and words in rec.boundary_detail, rec
            assert spec.overlay is None and spec.tools_run == 0 and tree_hash(root) == before
            out = await s.submit("edit a")  # live, the same output is a warning (or the stop) on the host
            assert not out.accepted and (root / "hook-wrote").exists()

    trio.run(main)


def test_a_forks_hooks_read_the_forks_own_transcript(tmp_path: Path) -> None:
    # The sandbox hides /tmp: the transcripts go where it can read them (the checkout is always visible).
    where = REPO / f".hook-transcripts-{os.getpid()}"
    root = make_project(tmp_path)
    settings(
        root,
        "Edit",
        'python3 -c "import json, shutil, sys; '
        "shutil.copy(json.load(sys.stdin)['transcript_path'], 'seen.jsonl')\"",
    )
    try:

        async def main() -> None:
            async with spec_session(root, hook_transcript_dir=where) as s:
                spec = await speculate(s, "edit a")
                assert spec.record.boundary == "complete", spec.record
                lines = [json.loads(x) for x in spec.overlay.read_text("seen.jsonl").splitlines()]
                prompts = [
                    b["text"]
                    for x in lines
                    if x["type"] == "user"
                    for b in x["message"]["content"]
                    if b.get("type") == "text"
                ]
                assert prompts == ["prepare edit a", "edit a"]  # the parent's turn, then the fork's own
                assert lines[-1]["message"]["content"][0]["name"] == "Edit"
                assert not list(where.rglob("seen.jsonl")) and list(where.rglob("speculation-1.jsonl"))

        trio.run(main)
        assert not list(where.rglob("speculation-*.jsonl"))  # a fork's copy goes with the session
    finally:
        shutil.rmtree(where, ignore_errors=True)
