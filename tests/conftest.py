"""Shared fixtures. Area-specific fixtures live in the area's own conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_user_claude_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sessions read ~/.claude (settings with hooks, CLAUDE.md); a test sees an empty one of its own, so
    whatever the person running the suite keeps there cannot change what a test observes."""
    d = tmp_path_factory.mktemp("claude-config")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(d))
    return d
