"""Workspace trust as Claude Code 2.1.332 stores and reads it (``projects[<path>].hasTrustDialogAccepted`` in
``$CLAUDE_CONFIG_DIR/.claude.json``, else ``~/.claude.json``): which entry trusts a folder, where a yes is
recorded (tests/repl/test_permission_options.py asks the REPL's question)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from speculate.trust import global_config_path, is_trusted, record_key, record_trust, trusted_by


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    return tmp_path / "cfg" / ".claude.json"


def trust(config: Path, *folders: Path, value: object = True) -> None:
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"projects": {str(f): {"hasTrustDialogAccepted": value} for f in folders}}))


def test_the_global_config_follows_claude_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "c"))
    assert global_config_path() == tmp_path / "c" / ".claude.json"
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert global_config_path() == tmp_path / "h" / ".claude.json"


def test_a_folders_own_entry_trusts_it_and_a_parent_does_not_outside_git(
    tmp_path: Path, config: Path
) -> None:
    proj = tmp_path / "a" / "proj"
    proj.mkdir(parents=True)
    assert not is_trusted(proj)
    trust(config, proj)
    assert is_trusted(proj)
    trust(config, proj, value=False)
    assert not is_trusted(proj)
    trust(config, tmp_path / "a")  # the parent: no git repository, so it does not count
    assert not is_trusted(proj)
    trust(config, proj / "sub")  # nor does a child
    assert not is_trusted(proj)


def test_inside_git_a_folder_up_to_the_root_trusts(tmp_path: Path, config: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    trust(config, repo)
    assert trusted_by(repo / "pkg" / "sub") == repo
    trust(config, tmp_path)  # above the repository's root: not counted
    assert not is_trusted(repo) and not is_trusted(repo / "pkg")
    assert record_key(repo / "pkg") == repo  # where the question records the answer


def test_recording_keeps_the_rest_of_the_file(tmp_path: Path, config: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    config.parent.mkdir(parents=True)
    config.write_text(
        json.dumps({"numStartups": 3, "projects": {str(proj): {"allowedTools": ["x"]}, "/other": {"a": 1}}})
    )
    assert record_trust(proj) == proj
    data = json.loads(config.read_text())
    assert data["numStartups"] == 3 and data["projects"]["/other"] == {"a": 1}
    assert data["projects"][str(proj)] == {"allowedTools": ["x"], "hasTrustDialogAccepted": True}
    assert is_trusted(proj)


def test_a_new_file_is_private_and_the_home_folder_is_never_recorded(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    record_trust(proj)
    assert config.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("HOME", str(proj))
    before = config.read_text()
    assert record_trust(proj) is None and config.read_text() == before
