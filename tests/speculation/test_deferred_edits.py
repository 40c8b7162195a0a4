"""Edits in default mode asked about on acceptance (#37 item 2, ``SessionConfig.spec_edits = "ask"``): a
fork's Write/Edit that the live path would ask about is written into its overlay and recorded for approval,
as a sandboxed command is; accepting asks the live path's questions once (showing each edit's diff), yes lands
the fork's work as typing and answering yes would, and no leaves the project as it was and runs the turn
live, asking as usual."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bench.workspace import manifest
from speculate.agent_types import summarize
from speculate.models.anthropic import AnthropicModel
from speculate.repl.render import approval_lines
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.approvals import PendingApproval

from .conftest import tree_hash

SCENARIO = """
name: deferred-edits
description: a turn that edits one file and writes another
files:
  a.txt: "alpha\\nbeta\\n"
turns:
  - prompt: "look at a"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a.txt holds alpha."
    suggestion: "fix it and take a note"
  - prompt: "fix it and take a note"
    steps:
      - tools:
          - Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "gamma"}
      - tools:
          - Write: {file_path: "{root}/notes.txt", content: "fixed\\n"}
      - text: "Fixed, and noted."
    suggestion: null
"""
PROMPT = "fix it and take a note"


def project(tmp: Path, name: str) -> Path:
    return parse_scenario(SCENARIO).materialize(tmp / name)


@asynccontextmanager
async def session(
    root: Path, *, speculate: bool, ask: Any, approve: Any = None, **cfg: Any
) -> AsyncIterator[Session]:
    cfg.setdefault("spec_edits", "ask")
    with SimServer([parse_scenario(SCENARIO)], time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(
                project=root,
                model=model,
                mode="default",
                speculate=speculate,
                user_dir=root.parent / f"{root.name}-user",
                events_path=root.parent / f"{root.name}.jsonl",
                trusted=True,
                **cfg,
            )
            async with open_session(config, ask=ask, approve=approve) as s:
                yield s


def questions(root: Path) -> tuple[str, str]:
    edit = summarize("Edit", {"file_path": f"{root}/a.txt", "old_string": "alpha", "new_string": "gamma"})
    return edit, summarize("Write", {"file_path": f"{root}/notes.txt", "content": "fixed\n"})


async def turn(
    root: Path, *, speculate: bool, answer: str | list[str], approve: Any = None
) -> tuple[list[str], Any, Any]:
    """Turn 1, then the prompt typed (no speculation) or accepted; the questions the second turn asked.
    ``answer``: the answer to every question, or the answers in the order asked."""
    asked: list[str] = []
    shown: list[Any] = []

    async def ask(tool: str, summary: str) -> str:
        asked.append(summary)
        shown.append(s.authorizer.question)  # what the REPL's question shows: the call and its diff
        return answer if isinstance(answer, str) else answer[len(asked) - 1]

    async with session(root, speculate=speculate, ask=ask, approve=approve) as s:
        await s.submit("look at a")
        before = tree_hash(root)
        if speculate:
            assert await s.wait_suggestion() == PROMPT
            await s.wait_speculation()
            spec = s.engine._spec
            # The fork went past both edits, into its overlay only, and holds them for the question.
            assert spec.record.boundary == "complete", spec.record
            assert sorted(c.path for c in spec.overlay.changes()) == ["a.txt", "notes.txt"]
            assert [p.tool for p in spec.approvals.pending] == ["Edit", "Write"]
            assert tree_hash(root) == before
        assert asked == []
        out = await s.submit(PROMPT)
        if speculate:
            assert all(q is not None and q.input.get("file_path") for q in shown), shown
        recs = [r for r in s.events.records if r.kind == "speculation"]
        return asked, out, recs


def test_yes_lands_the_edits_as_typing_and_answering_yes_would(tmp_path: Path) -> None:
    typed_root = project(tmp_path, "typed")
    typed, _, _ = trio.run(lambda: turn(typed_root, speculate=False, answer="y"))
    root = project(tmp_path, "proj")
    asked, out, recs = trio.run(lambda: turn(root, speculate=True, answer="y"))
    # The same questions as typing it, each once.
    assert asked == [q.replace(str(typed_root), str(root)) for q in typed] == list(questions(root))
    assert out.accepted and out.result is None, out  # the fork's whole turn: no request after accepting
    assert manifest(root) == manifest(typed_root)
    assert (root / "a.txt").read_text() == "gamma\nbeta\n" and (root / "notes.txt").read_text() == "fixed\n"
    (rec,) = recs
    assert rec.outcome == "accepted" and rec.approval == "approved"
    assert [a.split(":")[0] for a in rec.approvals] == list(questions(root))


def test_no_leaves_the_project_as_it_was_and_runs_the_turn_live(tmp_path: Path) -> None:
    typed_root = project(tmp_path, "typed")
    pristine = tree_hash(typed_root)
    typed, _, _ = trio.run(lambda: turn(typed_root, speculate=False, answer="n"))
    root = project(tmp_path, "proj")
    asked, out, recs = trio.run(lambda: turn(root, speculate=True, answer="n"))
    edit, write = questions(root)
    # The first no declines the speculation (the rest are not asked); the live turn then takes that answer
    # for the same question instead of asking it again: the questions are the typed turn's, each once.
    # (Typed, a no to the edit lets the model go on to the write, which is asked about too.)
    assert asked == [q.replace(str(typed_root), str(root)) for q in typed] == [edit, write]
    assert not out.accepted and "not approved" in out.note
    assert tree_hash(root) == pristine and tree_hash(typed_root) == pristine
    (rec,) = recs
    assert rec.outcome == "declined" and rec.approval == "declined"


def test_answers_given_at_acceptance_are_not_asked_again_by_the_live_turn(tmp_path: Path) -> None:
    """Yes to the edit, no to the write: the speculation is declined at the write, and the live turn takes
    both answers for its same two questions. Asked as often as typing it (a study's arms ask alike), and the
    tree is the typed turn's: the edit made, the note not written."""
    typed_root = project(tmp_path, "typed")
    typed, _, _ = trio.run(lambda: turn(typed_root, speculate=False, answer=["y", "n"]))
    root = project(tmp_path, "proj")
    asked, out, recs = trio.run(lambda: turn(root, speculate=True, answer=["y", "n"]))
    assert asked == [q.replace(str(typed_root), str(root)) for q in typed] == list(questions(root))
    assert not out.accepted and "not approved" in out.note
    assert tree_hash(root) == tree_hash(typed_root) and (root / "a.txt").read_text() == "gamma\nbeta\n"
    assert not (root / "notes.txt").exists()
    (rec,) = recs
    assert rec.outcome == "declined"


def test_an_approval_policy_sees_each_edit_s_diff(tmp_path: Path) -> None:
    root = project(tmp_path, "proj")
    seen: list[PendingApproval] = []

    async def approve(pending: Sequence[PendingApproval]) -> str:
        seen.extend(pending)
        return "y"

    asked, out, _ = trio.run(lambda: turn(root, speculate=True, answer="n", approve=approve))
    assert asked == [] and out.accepted  # one answer for the set, from the policy (the REPL asks once)
    edit, write = seen
    assert "--- a/a.txt\n+++ b/a.txt\n" in edit.diff and "-alpha\n+gamma\n" in edit.diff, edit.diff
    assert "--- /dev/null\n+++ b/notes.txt\n" in write.diff and "+fixed\n" in write.diff, write.diff
    lines = approval_lines(seen)
    assert "    -alpha" in lines and "    +gamma" in lines and "    +fixed" in lines, lines
    assert (root / "a.txt").read_text() == "gamma\nbeta\n"


def boundary_under_settings(
    root: Path, edits: str | None, cfg_edits: str | None, default: str = "stop"
) -> str:
    """The fork's boundary on the edit turn with ``speculation.edits`` in the project's settings (None: not
    set), ``SessionConfig.spec_edits`` (None: the settings decide) and ``spec_edits_default``."""
    if edits is not None:
        (root / ".claude").mkdir(exist_ok=True)
        (root / ".claude" / "settings.json").write_text(json.dumps({"speculation": {"edits": edits}}))

    async def main() -> str:
        async def ask(tool: str, summary: str) -> str:
            return "y"

        async with session(
            root, speculate=True, ask=ask, spec_edits=cfg_edits, spec_edits_default=default
        ) as s:
            await s.submit("look at a")
            assert await s.wait_suggestion() == PROMPT
            await s.wait_speculation()
            return s.engine._spec.record.boundary

    return trio.run(main)


def test_the_settings_key_chooses_ask_or_stop_and_the_config_overrides_it(tmp_path: Path) -> None:
    """``speculation.edits`` in settings.json: "ask" goes past the edits, "stop" stops at the first; absent,
    a session stops (the API's default); SessionConfig.spec_edits (the REPL's --spec-edits) wins over it."""
    assert boundary_under_settings(project(tmp_path, "ask"), "ask", None) == "complete"
    assert boundary_under_settings(project(tmp_path, "stop"), "stop", None) == "edit"
    assert boundary_under_settings(project(tmp_path, "unset"), None, None) == "edit"
    assert boundary_under_settings(project(tmp_path, "over"), "stop", "ask") == "complete"
    # The REPL's default (ask) yields to the settings' key, and applies where none is set.
    assert boundary_under_settings(project(tmp_path, "repl-stop"), "stop", None, "ask") == "edit"
    assert boundary_under_settings(project(tmp_path, "repl-unset"), None, None, "ask") == "complete"


def test_a_bad_edits_setting_names_the_file_and_key(tmp_path: Path) -> None:
    from speculate.settings import SettingsError, load_settings

    root = project(tmp_path, "bad")
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(json.dumps({"speculation": {"edits": "sometimes"}}))
    with pytest.raises(SettingsError) as e:
        load_settings(root, trusted=True)
    assert "settings.json" in str(e.value) and "edits" in str(e.value), e.value
