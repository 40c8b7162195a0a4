"""A speculation's Bash starts in the session's current directory and keeps its own ``cd`` from command to
command (in the sandbox); accepting it leaves the session where the fork ended, as the live run would have;
and every permission check is given the directory the command runs in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.models.anthropic import AnthropicModel
from speculate.permissions import PermissionGate
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.sandbox_shell import bash_sandbox

SCENARIO = """
name: fork-cwd
turns:
  - prompt: "go to sub"
    steps:
      - tools:
          - Bash: {command: "cd sub"}
      - text: "In sub."
    suggestion: "work deeper"
  - prompt: "work deeper"
    steps:
      - tools:
          - Bash: {command: "pwd"}
      - tools:
          - Bash: {command: "cd deep && touch made.txt"}
      - tools:
          - Bash: {command: "pwd"}
      - text: "Done deeper."
    suggestions:
      - text: "look elsewhere"
        steps:
          - text: "Elsewhere."
  - prompt: "where now"
    steps:
      - tools:
          - Bash: {command: "pwd; ls"}
      - text: "Here."
    suggestion: null
"""


def results(messages: list[Any]) -> list[str]:
    return [
        str(b["content"])
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


@asynccontextmanager
async def session(root: Path) -> AsyncIterator[Session]:
    with SimServer([parse_scenario(SCENARIO)], time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            events = root.parent / "events.jsonl"
            cfg = SessionConfig(project=root, model=model, events_path=events, allow=["Bash"])
            async with open_session(cfg) as s:
                yield s


def test_a_fork_starts_in_the_sessions_directory_and_hands_its_own_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    root = tmp_path / "proj"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "deep" / "keep.txt").write_text("x\n")
    root = root.resolve()
    # Every Bash decision, with the directory the gate was given (the real gate decides).
    seen: list[tuple[str, str | None]] = []
    check = PermissionGate.check

    def recording(self: PermissionGate, tool: Any, inp: Any, *, cwd: Any = None) -> Any:
        if tool.name == "Bash":
            seen.append((inp.command, None if cwd is None else str(cwd)))
        return check(self, tool, inp, cwd=cwd)

    monkeypatch.setattr(PermissionGate, "check", recording)

    async def main() -> None:
        async with session(root) as s:
            await s.submit("go to sub")
            assert s.ctx.cwd == root / "sub"
            assert await s.wait_suggestion() == "work deeper"
            await s.wait_speculation()
            spec = s.engine._spec
            assert spec is not None and spec.complete, spec.record if spec else None
            assert results(spec.agent.messages[spec.prefix_len :]) == [
                str(root / "sub"),
                "(no output)",
                str(root / "sub" / "deep"),
            ]
            assert not (root / "sub" / "deep" / "made.txt").exists()  # in the overlay only
            assert s.ctx.cwd == root / "sub"  # the session has not moved yet
            out = await s.submit("work deeper")
            assert out.accepted
            assert (root / "sub" / "deep" / "made.txt").is_file()
            assert s.ctx.cwd == root / "sub" / "deep"
            assert await s.wait_suggestion() == "look elsewhere"
            out = await s.submit("where now")  # typed: a live turn, from where the fork ended
            assert not out.accepted
            assert results(s.messages)[-1] == f"{root / 'sub' / 'deep'}\nkeep.txt\nmade.txt"

    trio.run(main)
    fork_calls = [c for c in seen if c[0] in ("pwd", "cd deep && touch made.txt")]
    assert ("cd sub", str(root)) in seen
    assert ("pwd", str(root / "sub")) in fork_calls  # the fork's first command, from the session's directory
    assert ("pwd", str(root / "sub" / "deep")) in fork_calls  # after its own cd
    assert ("cd deep && touch made.txt", str(root / "sub")) in fork_calls
    assert ("pwd; ls", str(root / "sub" / "deep")) in seen
    assert all(cwd is not None for _, cwd in seen)


def test_a_fork_whose_directory_is_outside_the_project_stops_before_bash(tmp_path: Path) -> None:
    """The live session may stay in an additional working directory; the sandbox holds only the project."""
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    root = tmp_path / "proj"
    (root / "sub" / "deep").mkdir(parents=True)
    extra = tmp_path / "extra"
    extra.mkdir()

    async def main() -> None:
        async with session(root.resolve()) as s:
            s.ctx.shell_dir.working_dirs = (extra.resolve(),)
            await s.submit("go to sub")
            s.ctx.shell_dir.path = extra.resolve()  # as if the turn had ended with `cd` there
            assert await s.wait_suggestion() == "work deeper"
            await s.wait_speculation()
            rec = s.engine._spec.record
            assert rec.boundary == "bash"
            assert f"it would run in {extra.resolve()}, outside" in rec.boundary_detail

    trio.run(main)


def test_the_sandboxed_bash_tool_keeps_its_directory_as_the_live_one(tmp_path: Path) -> None:
    """The same rules in the sandbox, where the directory comes back on stderr and is taken out of it."""
    box = bash_sandbox()
    if box.backend is None:
        pytest.skip(f"speculative Bash is {box.line}")
    from speculate.speculation.fork_fs import BoundedWrites, fork_overlay
    from speculate.speculation.sandbox_shell import SandboxShell
    from speculate.tools import tools_by_name
    from speculate.tools.base import ShellDir, ToolContext

    root = (tmp_path / "proj").resolve()
    (root / "sub" / "deep").mkdir(parents=True)
    ov = fork_overlay(root)
    ctx = ToolContext(
        fs=BoundedWrites(ov),
        shell=SandboxShell(ov, box.backend),
        spill_dir=tmp_path / "spill",
        shell_dir=ShellDir(root / "sub"),
    )
    bash = tools_by_name()["Bash"]

    async def run(command: str) -> str:
        res = await bash.call(bash.parse({"command": command}), ctx)
        return ("ERROR " if res.is_error else "") + str(res.content)

    async def main() -> list[str]:
        return [
            await run(c)
            for c in [
                "pwd",
                "echo out; printf err >&2; cd deep",
                "pwd",
                "mkdir new && cd new && touch f",  # a directory only the overlay holds
                "pwd; ls",
                "cd /tmp",
                "pwd",
                "cd sub; exit 0",
                "pwd",
                "cd sub; false",
                "pwd",
            ]
        ]

    try:
        got = trio.run(main)
    finally:
        ov.discard()
    assert got == [
        str(root / "sub"),
        "out\nerr",
        str(root / "sub" / "deep"),
        "(no output)",
        f"{root / 'sub' / 'deep' / 'new'}\nf",
        f"Shell cwd was reset to {root}",
        str(root),
        "(no output)",
        str(root),
        "ERROR Exit code 1",
        str(root),
    ]
    assert not (root / "sub" / "deep" / "new").exists()
