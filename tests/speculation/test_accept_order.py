"""Accepting in the order approve → check → replay → promote: a speculation the real tree moved under is
discarded before anything of it is shown, and a cancelled acceptance says what did (and did not) land."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from speculate.agent_types import ToolFinished
from speculate.models.base import TextDelta
from speculate.repl.render import cancelled_line
from speculate.speculation.sandbox_shell import bash_sandbox

from .conftest import engine_session, make_project, tree_hash


def test_a_conflicting_speculation_shows_nothing_of_its_transcript(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    events: list = []

    async def main() -> None:
        async with engine_session(root, events=events, mode="acceptEdits") as (s, _):
            await s.submit("look at a")
            await s.wait_speculation()
            assert s.engine._spec.record.boundary == "complete"  # its Edit is done in the overlay
            (root / "a.txt").write_text("alpha\nand a line the user added meanwhile\n")
            seen = len(events)
            out = await s.submit("change alpha to gamma")
            new = events[seen:]
            edits = [e for e in new if isinstance(e, ToolFinished) and e.name == "Edit"]
            assert len(edits) == 1, "the fork's Edit was replayed before the conflict was known"
            assert "".join(e.text for e in new if isinstance(e, TextDelta)).count("Changed a.txt.") == 1
            assert not out.accepted and "a.txt: changed in the real tree" in out.note
            assert (
                root / "a.txt"
            ).read_text() == "gamma\nand a line the user added meanwhile\n"  # the live edit
            assert s.engine.landing is not None and not s.engine.landing.promoted and s.engine.landing.dropped

    trio.run(main)


def test_cancelling_an_accepted_running_speculation_lands_nothing_and_says_so(tmp_path: Path) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with engine_session(root, mode="bypassPermissions") as (s, _):
            await s.submit("start sleeping")
            assert await s.wait_suggestion() == "sleep in the sandbox"
            with trio.move_on_after(2.0) as scope:  # Esc while the fork's `sleep 30` still runs
                await s.submit("sleep in the sandbox")
            assert scope.cancelled_caught
            landing = s.engine.landing
            assert landing is not None and not landing.promoted
            assert cancelled_line(landing, []).startswith(
                "turn cancelled: nothing of the accepted speculation was applied (what it showed above was "
                "discarded; the project is as it was)"
            )
            assert tree_hash(root) == before

    trio.run(main)
