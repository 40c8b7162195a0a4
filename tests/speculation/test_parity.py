"""Accepting a suggestion does what typing the prompt and answering its questions would: in every permission
mode the set of questions asked is the same speculated and typed, answering no leaves the tree as it was,
and answering yes leaves the same tree. A sandboxed command the live path would ask about (``find build -delete``
in default mode, ``python -m pytest -q`` in acceptEdits) runs in the fork and is asked about on acceptance,
before anything lands."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bench.workspace import CACHE_DIRS, manifest
from speculate.agent_types import summarize
from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.approvals import PendingApproval
from speculate.speculation.sandbox_shell import bash_sandbox

from .conftest import tree_hash

pytestmark = pytest.mark.slow

PARITY = """
name: parity
description: a prompt whose turn deletes, runs the tests and writes
files:
  a.txt: "alpha\\n"
  build/out.o: "object\\n"
  build/lib/mod.py: "x = 1\\n"
  test_a.py: "def test_ok():\\n    assert 1 + 1 == 2\\n"
turns:
  - prompt: "look at the build"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "There is a stale build directory."
    suggestion: "clean and test"
  - prompt: "clean and test"
    steps:
      - tools:
          - Bash: {command: "find build -delete"}
      - tools:
          - Bash: {command: "python -m pytest -q"}
      - tools:
          - Write: {file_path: "{root}/notes.txt", content: "cleaned\\n"}
      - text: "Cleaned and tested."
    suggestion: null
"""
RM, PYTEST = "Bash(find build -delete)", "Bash(python -m pytest -q)"


@pytest.fixture(autouse=True)
def _sandbox() -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")


def project(tmp: Path, name: str, allow: Sequence[str] = ()) -> Path:
    root = parse_scenario(PARITY).materialize(tmp / name)
    if allow:
        (root / ".claude").mkdir()
        (root / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": list(allow)}}))
    return root


@asynccontextmanager
async def session(
    root: Path, *, mode: str, speculate: bool, ask: Any, approve: Any = None
) -> AsyncIterator[Session]:
    # `python` in the scenario is the interpreter running these tests (it has pytest), in and out of the sandbox.
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    with SimServer([parse_scenario(PARITY)], time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            cfg = SessionConfig(
                project=root,
                model=model,
                mode=mode,
                speculate=speculate,
                tool_env=env,  # type: ignore[arg-type]
                user_dir=root.parent / f"{root.name}-user",
                events_path=root.parent / f"{root.name}.jsonl",
                trusted=True,  # the test's own workspace: its allow rules count (speculate.trust)
            )
            async with open_session(cfg, ask=ask, approve=approve) as s:
                yield s


async def clean_and_test(root: Path, *, mode: str, speculate: bool, answer: str) -> tuple[list[str], Any]:
    """Turn 1, then "clean and test" typed (no speculation) or accepted; the questions turn 2 asked."""
    asked: list[str] = []

    async def ask(tool: str, summary: str) -> str:
        asked.append(summary)
        return answer

    async with session(root, mode=mode, speculate=speculate, ask=ask) as s:
        await s.submit("look at the build")
        if speculate and mode != "plan":
            assert await s.wait_suggestion() == "clean and test"
            await s.wait_speculation()
            assert (root / "build" / "out.o").exists()  # the fork ran find build -delete in its overlay only
        assert asked == []
        out = await s.submit("clean and test")
        asks = mode in ("default", "acceptEdits")  # where the fork ran commands the live path asks about
        assert out.accepted == (speculate and mode != "plan" and (answer != "n" or not asks))
        return asked, [r for r in s.events.records if r.kind == "speculation"]


def files(root: Path) -> dict[str, Any]:
    """The tree as the user sees it: tool caches left out (their bytes hold timestamps)."""
    return {k: v for k, v in manifest(root).items() if not set(k.split("/")) & CACHE_DIRS}


def typed_then_speculated(
    tmp: Path, *, mode: str, answer: str, allow: Sequence[str] = ()
) -> tuple[list[str], list[str], list[Any], Path, Path]:
    """The turn typed on a fresh project, then accepted on another fresh one at the same path (the
    questions name paths)."""
    root = project(tmp, "proj", allow)
    typed, _ = trio.run(lambda: clean_and_test(root, mode=mode, speculate=False, answer=answer))
    typed_root = root.rename(tmp / "typed")
    root = project(tmp, "proj", allow)
    spec, recs = trio.run(lambda: clean_and_test(root, mode=mode, speculate=True, answer=answer))
    return typed, spec, recs, typed_root, root


@pytest.mark.parametrize("answer", ["y", "n"])
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions", "plan"])
def test_the_same_questions_speculated_and_typed(tmp_path: Path, mode: str, answer: str) -> None:
    before = tree_hash(project(tmp_path, "pristine"))
    typed, spec, recs, typed_root, root = typed_then_speculated(tmp_path, mode=mode, answer=answer)
    assert set(spec) == set(typed), (spec, typed)
    # The scenario does ask where the live path asks: otherwise the comparison would say nothing.
    write = summarize("Write", {"file_path": f"{root}/notes.txt"})
    assert set(typed) == {"default": {RM, PYTEST, write}, "acceptEdits": {RM, PYTEST}}.get(mode, set())
    assert files(root) == files(typed_root)
    if (
        answer == "n" and typed
    ):  # nothing asked about happened (acceptEdits writes notes.txt unasked, both ways)
        for r in (root, typed_root):
            assert (r / "build" / "out.o").exists() and not (r / ".pytest_cache").exists()
            assert mode != "default" or tree_hash(r) == before
    else:
        assert mode in ("plan", "bypassPermissions") or not (root / "build").exists()
    if mode in ("default", "acceptEdits"):
        (rec,) = recs
        assert rec.approvals[0] == "Bash(find build -delete): deleted build/"
        assert rec.approvals[1].startswith("Bash(python -m pytest -q): wrote ")
        assert rec.approval == ("approved" if answer == "y" else "declined")
        assert rec.outcome == ("accepted" if answer == "y" else "declined")


def test_an_allow_rule_takes_the_question_away_speculated_and_typed(tmp_path: Path) -> None:
    typed, spec, recs, typed_root, root = typed_then_speculated(
        tmp_path, mode="acceptEdits", answer="y", allow=["Bash(find build -delete)"]
    )
    assert typed == spec == [PYTEST]
    assert [a.split(":")[0] for a in recs[0].approvals] == [PYTEST]
    assert files(root) == files(typed_root)


def test_an_approval_policy_answers_once_and_always_adds_the_allow_rules(tmp_path: Path) -> None:
    root = project(tmp_path, "spec")
    seen: list[list[PendingApproval]] = []

    async def approve(pending: Sequence[PendingApproval]) -> str:
        seen.append(list(pending))
        return "always"

    async def never(tool: str, summary: str) -> str:
        raise AssertionError(f"asked {summary} although the policy answered")

    async def main() -> None:
        async with session(root, mode="acceptEdits", speculate=True, ask=never, approve=approve) as s:
            await s.submit("look at the build")
            await s.wait_speculation()
            assert (root / "build" / "out.o").exists()  # nothing lands before the answer
            out = await s.submit("clean and test")
            assert out.accepted and out.speculation is not None and out.speculation.approval == "always"
            assert {RM, PYTEST} <= set(s.authorizer.allow)
            assert out.speculation.files_deleted == ["build/"]

    trio.run(main)
    (pending,) = seen
    rm, test = pending
    assert (rm.summary, rm.files.deleted, rm.files.written) == (RM, ["build/"], [])
    assert test.summary == PYTEST and any(".pytest_cache" in p for p in test.files.written)
    assert "build/out.o" not in " ".join(test.files.written + test.files.deleted)  # rm's, not pytest's


def test_with_no_one_to_ask_the_speculation_is_discarded_as_the_live_path_would_refuse(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, "spec")
    before = tree_hash(root)

    async def main() -> None:
        async with session(root, mode="acceptEdits", speculate=True, ask=None) as s:
            await s.submit("look at the build")
            await s.wait_speculation()
            out = await s.submit("clean and test")
            assert not out.accepted and "not approved" in out.note
            results = [b for m in s.messages for b in m["content"] if b.get("type") == "tool_result"]
            assert sum("no one to ask" in str(b["content"]) for b in results) == 2  # rm and pytest, live

    trio.run(main)
    assert tree_hash(root) != before  # the Write ran (acceptEdits)...
    assert (root / "build" / "out.o").exists() and not (root / ".pytest_cache").exists()  # ...nothing else


def test_a_command_needing_approval_after_acceptance_is_asked_at_the_call(tmp_path: Path) -> None:
    """Accepted while the fork still runs: from then on the user is there, and asked as the live path would."""
    root = project(tmp_path, "spec")
    asked: list[str] = []

    async def ask(tool: str, summary: str) -> str:
        asked.append(summary)
        return "y"

    async def main() -> None:
        async with session(root, mode="acceptEdits", speculate=True, ask=ask) as s:
            await s.submit("look at the build")
            assert await s.wait_suggestion() == "clean and test"
            out = await s.submit("clean and test")  # at once: the fork has barely started
            assert out.accepted
            assert sorted(asked) == sorted([RM, PYTEST])  # each asked once: on acceptance or at its call

    trio.run(main)
    assert not (root / "build").exists() and (root / "notes.txt").read_text() == "cleaned\n"
    assert os.path.isdir(root / ".pytest_cache")


def test_a_turn_cancelled_at_the_approval_question_drops_the_speculation(tmp_path: Path) -> None:
    root = project(tmp_path, "spec")
    before = tree_hash(root)
    asked: list[str] = []

    async def approve(pending: Sequence[PendingApproval]) -> str:
        await trio.sleep_forever()  # the user presses Ctrl-C instead of answering
        raise AssertionError

    async def ask(tool: str, summary: str) -> str:
        asked.append(summary)
        return "n"

    async def main() -> None:
        async with session(root, mode="acceptEdits", speculate=True, ask=ask, approve=approve) as s:
            await s.submit("look at the build")
            await s.wait_speculation()
            with trio.move_on_after(0.5):
                await s.submit("clean and test")
            assert s.engine._spec is None and s.suggestion is None
            rec = [r for r in s.events.records if r.kind == "speculation"][-1]
            assert rec.outcome == "aborted" and rec.reason == "stopped"
            assert tree_hash(root) == before and asked == []
            out = await s.submit("clean and test")  # typed again: a normal turn, asking as usual
            assert not out.accepted and asked == [RM, PYTEST]

    trio.run(main)
