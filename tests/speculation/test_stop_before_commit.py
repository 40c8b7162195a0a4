"""A fork that would commit stops before the commit (#36 item 3): ``git add`` / ``git commit`` write the
repository (``.git/``), which never lands from a fork, so run there they would only make the whole overlay
unlandable. Stopped before, the work before the commit lands on acceptance, the commit runs live and is
asked about as the live path asks, and nothing is discarded."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.agent_types import summarize
from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.sandbox_shell import bash_sandbox

COMMIT = "git add a.txt && git commit -q -m fix"
SCENARIO = f"""
name: commit-fork
description: a turn that edits, then commits
files:
  a.txt: "alpha\\n"
turns:
  - prompt: "look at a"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/a.txt"}}
      - text: "a.txt holds alpha."
    suggestion: "fix it and commit"
  - prompt: "fix it and commit"
    steps:
      - tools:
          - Edit: {{file_path: "{{root}}/a.txt", old_string: "alpha", new_string: "gamma"}}
      - tools:
          - Bash: {{command: "{COMMIT}"}}
      - text: "Fixed and committed."
    suggestion: null
"""
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


@pytest.fixture(autouse=True)
def _sandbox() -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    ).stdout


def project(tmp: Path, name: str) -> Path:
    root = parse_scenario(SCENARIO).materialize(tmp / name)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=root, check=True, env={"PATH": "/usr/bin:/bin", **IDENTITY})
    return root


@asynccontextmanager
async def session(root: Path, *, mode: str, speculate: bool, ask: Any, **cfg: Any) -> AsyncIterator[Session]:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", **IDENTITY}
    with SimServer([parse_scenario(SCENARIO)], time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(
                project=root,
                model=model,
                mode=mode,  # type: ignore[arg-type]
                speculate=speculate,
                tool_env=env,
                user_dir=root.parent / f"{root.name}-user",
                events_path=root.parent / f"{root.name}.jsonl",
                trusted=True,
                **cfg,
            )
            async with open_session(config, ask=ask) as s:
                yield s


async def fix_and_commit(root: Path, *, mode: str, speculate: bool, **cfg: Any) -> tuple[list[str], Any]:
    asked: list[str] = []

    async def ask(tool: str, summary: str) -> str:
        asked.append(summary)
        return "y"

    async with session(root, mode=mode, speculate=speculate, ask=ask, **cfg) as s:
        await s.submit("look at a")
        if speculate:
            assert await s.wait_suggestion() == "fix it and commit"
            await s.wait_speculation()
            spec = s.engine._spec
            rec = spec.record
            # Stopped before the commit, its overlay kept: the edit is there, the real tree untouched.
            assert rec.boundary == "protected" and "writes the repository" in rec.boundary_detail, rec
            assert [c.path for c in spec.overlay.changes()] == ["a.txt"]
            assert (root / "a.txt").read_text() == "alpha\n" and git(
                root, "rev-list", "--count", "HEAD"
            ) == "1\n"
        assert asked == []
        out = await s.submit("fix it and commit")
        assert out.accepted == speculate and not out.error, out
        assert "discarded" not in out.note
        return asked, [r for r in s.events.records if r.kind in ("speculation", "suggestion")]


@pytest.mark.parametrize(
    ("mode", "cfg"),
    [("acceptEdits", {}), ("default", {"spec_edits": "ask"})],
    ids=["acceptEdits", "default-ask"],
)
def test_an_accepted_fork_that_commits_lands_its_work_and_commits_live(
    tmp_path: Path, mode: str, cfg: dict[str, Any]
) -> None:
    typed_root = project(tmp_path, "typed")
    typed, _ = trio.run(lambda: fix_and_commit(typed_root, mode=mode, speculate=False, **cfg))
    root = project(tmp_path, "proj")
    asked, recs = trio.run(lambda: fix_and_commit(root, mode=mode, speculate=True, **cfg))
    # The same questions as typing it: the commit is asked about live (and, in default mode, the edit on
    # acceptance).
    commit_q = summarize("Bash", {"command": COMMIT})
    edit_q = summarize("Edit", {"file_path": f"{root}/a.txt", "old_string": "alpha", "new_string": "gamma"})
    assert asked == ([edit_q, commit_q] if mode == "default" else [commit_q])
    assert [q.replace(str(typed_root), str(root)) for q in typed] == asked
    # The work before the commit landed, and the commit made live holds it.
    assert (root / "a.txt").read_text() == "gamma\n"
    assert git(root, "rev-list", "--count", "HEAD") == "2\n"
    assert git(root, "log", "-1", "--format=%s") == "fix\n"
    assert git(root, "show", "--name-only", "--format=", "HEAD") == "a.txt\n"
    assert git(root, "status", "--porcelain") == ""
    # Nothing discarded: one speculation, accepted, its edit promoted; no suggestion thrown away with it.
    specs = [r for r in recs if r.kind == "speculation"]
    assert [(r.outcome, r.boundary, r.files_written) for r in specs] == [("accepted", "protected", ["a.txt"])]
    assert [r.outcome for r in recs if r.kind == "suggestion"] == ["accepted"]
