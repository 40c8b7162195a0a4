"""The session under failure: a loop error ends the turn and the session goes on, exceptions come out of
``open_session`` as themselves, and nothing it made in /tmp outlives a failed start."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import trio

from speculate.permissions import PermissionRuleError

from .conftest import engine_session, make_project


def spill_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("speculate-spill-*")}


def test_max_turns_ends_the_turn_with_a_message_and_the_session_goes_on(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> None:
        async with engine_session(root, max_turns=1, speculate=False) as (s, _):
            first = await s.submit("look at a")  # Read, then text: two requests, one allowed
            assert "max_turns (1)" in first.error and first.text == ""
            s.cfg.max_turns = s.agent.max_turns = 50
            second = await s.submit("change alpha to gamma")
            assert second.error == "" and "Changed a.txt." in second.text

    trio.run(main)


def test_open_session_reraises_the_original_exception_not_a_group(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> None:
        with pytest.raises(KeyError, match="from the body"):
            async with engine_session(root) as (s, _):
                await s.submit("look at a")  # a speculation starts in the session's nursery
                raise KeyError("from the body")

    trio.run(main)


def test_a_failed_session_start_leaves_no_spill_directory(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    before = spill_dirs()

    async def main() -> None:
        with pytest.raises(PermissionRuleError, match="Bash\\("):
            async with engine_session(root, allow=["Bash("]):
                pass

    trio.run(main)
    assert spill_dirs() - before == set()
