"""Acceptance parity on the parse-based gate (#33): a turn that writes a sensitive file, redirects output
and reads outside the project asks the same questions accepted from a fork as typed, in every mode, and
leaves the same tree. A fork never writes the sensitive file (the guard's list is the gate's): it stops
before it, and on acceptance the rest runs live and asks as live."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from bench.workspace import CACHE_DIRS, manifest
from speculate.agent_types import summarize
from speculate.models.anthropic import AnthropicModel
from speculate.session import SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.sandbox_shell import bash_sandbox

pytestmark = pytest.mark.slow

SCENARIO = """
name: parity-gate
files:
  a.txt: "alpha\\n"
turns:
  - prompt: "look"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "Looked."
    suggestion: "set it up"
  - prompt: "set it up"
    steps:
      - tools:
          - Bash: {command: "echo ok > out.txt"}
      - tools:
          - Write: {file_path: "{root}/notes.txt", content: "notes\\n"}
      - tools:
          - Write: {file_path: "{root}/.vscode/settings.json", content: "{}\\n"}
      - text: "Set up."
    suggestion: null
"""
MODES = ["default", "acceptEdits", "dontAsk", "bypassPermissions", "plan"]


@pytest.fixture(autouse=True)
def _sandbox() -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")


async def run(root: Path, *, mode: str, speculate: bool, answer: str) -> list[str]:
    asked: list[str] = []

    async def ask(tool: str, summary: str) -> str:
        asked.append(summary)
        return answer

    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    with SimServer([parse_scenario(SCENARIO)], time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            cfg = SessionConfig(
                project=root,
                model=model,
                mode=mode,  # type: ignore[arg-type]
                speculate=speculate,
                tool_env=env,
                user_dir=root.parent / f"{root.name}-user",
            )
            async with open_session(cfg, ask=ask) as s:
                await s.submit("look")
                if speculate and mode != "plan":
                    assert await s.wait_suggestion() == "set it up"
                    await s.wait_speculation()
                    assert not (root / ".vscode").exists() and not (root / "out.txt").exists()
                await s.submit("set it up")
    return asked


def tree(root: Path) -> dict[str, object]:
    return {k: v for k, v in manifest(root).items() if not set(k.split("/")) & CACHE_DIRS}


@pytest.mark.parametrize("answer", ["y", "n"])
@pytest.mark.parametrize("mode", MODES)
def test_sensitive_files_and_redirections_ask_the_same_accepted_or_typed(
    tmp_path: Path, mode: str, answer: str
) -> None:
    root = parse_scenario(SCENARIO).materialize(tmp_path / "proj")
    typed = trio.run(lambda: run(root, mode=mode, speculate=False, answer=answer))
    typed_root = root.rename(tmp_path / "typed")
    root = parse_scenario(SCENARIO).materialize(tmp_path / "proj")
    accepted = trio.run(lambda: run(root, mode=mode, speculate=True, answer=answer))
    # As sets: a "no" at the acceptance question declines the fork and the turn runs live, asking again.
    assert set(accepted) == set(typed), (accepted, typed)
    sensitive = summarize("Write", {"file_path": f"{root}/.vscode/settings.json"})
    notes = summarize("Write", {"file_path": f"{root}/notes.txt"})
    redirect = summarize("Bash", {"command": "echo ok > out.txt"})
    # What the live path asks, mode by mode (Claude Code 2.1.332's gate): the comparison says something.
    expected = {
        "default": {redirect, notes, sensitive},
        "acceptEdits": {sensitive},  # the redirection and notes.txt run unasked; the sensitive file asks
    }.get(mode, set())
    assert set(typed) == expected
    assert tree(root) == tree(typed_root)
    landed = (root / ".vscode" / "settings.json").exists()
    assert landed == (mode == "bypassPermissions" or (answer == "y" and mode in ("default", "acceptEdits")))
