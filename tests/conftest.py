"""Shared fixtures. Area-specific fixtures live in the area's own conftest.py."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from overlayfs.state import ENV, remove_tree, wait_disposals

_STATE: Path | None = None
_DATA: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    # Promotion journals, locks and default overlays live in a per-user state dir: never the real home's.
    # Set in the environment so that every child process (REPL, FUSE server, killed promoters) agrees.
    global _STATE
    _STATE = Path(tempfile.mkdtemp(prefix="speculate-test-state-"))
    os.environ[ENV] = str(_STATE)
    # The transcripts hooks read (speculate.hooks.transcript) go to $XDG_DATA_HOME: never the real home's.
    global _DATA
    _DATA = Path(tempfile.mkdtemp(prefix="speculate-test-data-"))
    os.environ["XDG_DATA_HOME"] = str(_DATA)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _STATE is not None:
        wait_disposals()
        remove_tree(_STATE)
    if _DATA is not None:
        remove_tree(_DATA)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state dir of this test's own, for tests that look at what is pending in it."""
    d = tmp_path / "state"
    monkeypatch.setenv(ENV, str(d))
    return d


@pytest.fixture(autouse=True)
def _no_user_claude_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sessions read ~/.claude (settings with hooks, CLAUDE.md); a test sees an empty one of its own, so
    whatever the person running the suite keeps there cannot change what a test observes."""
    d = tmp_path_factory.mktemp("claude-config")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(d))
    return d
