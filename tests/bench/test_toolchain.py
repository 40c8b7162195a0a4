"""The fixed environment bench sessions run commands in: the workspace's own interpreter with its test
dependencies made by the harness, and a PATH that does not depend on the caller."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.toolchain import SYSTEM_PATH, ToolchainError, workspace_toolchain
from speculate.sim.scenario import default_scenario_dir

WORKSPACES = default_scenario_dir() / "workspaces"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # One cache for the module's tests (the env takes seconds to make), never the runner's ~/.cache.
    monkeypatch.setenv("SPECULATE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "toolchain-cache"))


def test_python_workspace_gets_its_own_venv_with_its_test_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nowhere")
    monkeypatch.setenv("VIRTUAL_ENV", "/elsewhere")
    tc = workspace_toolchain(WORKSPACES / "sample_project")
    first, *rest = tc.path.split(":")
    assert "/nowhere" not in tc.path and rest == list(SYSTEM_PATH)
    assert "bench-envs/sample_project-" in first and "pytest" in tc.describe
    # `python -m pytest` on that PATH is the venv's, and pytest is installed there, not borrowed.
    out = subprocess.run(
        ["bash", "-c", "command -v python; python -c 'import pytest, sys; print(sys.prefix)'"],
        env={"PATH": tc.path},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == f"{first}/python" and out[1] == str(Path(first).parent)
    assert workspace_toolchain(WORKSPACES / "sample_project") == tc  # cached: made once


def test_a_half_built_env_is_rebuilt(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text('[project]\nname = "w"\nversion = "0"\n')
    tc = workspace_toolchain(ws)
    env = Path(tc.path.split(":")[0]).parent
    (env / ".speculate-complete").unlink()  # as if the build was killed before it finished
    (env / "bin" / "python").unlink()
    assert workspace_toolchain(ws) == tc and (env / "bin" / "python").exists()


def test_node_workspace_uses_the_system_node_and_checks_engines(tmp_path: Path) -> None:
    tc = workspace_toolchain(WORKSPACES / "node_todo")
    assert tc.path == ":".join(SYSTEM_PATH) and tc.describe.startswith("node v")
    ws = tmp_path / "n"
    ws.mkdir()
    (ws / "package.json").write_text(json.dumps({"name": "n", "engines": {"node": ">=999"}}))
    with pytest.raises(ToolchainError, match=r"package\.json: engines\.node '>=999'"):
        workspace_toolchain(ws)
    (ws / "package.json").write_text(json.dumps({"name": "n", "devDependencies": {"mocha": "^10"}}))
    with pytest.raises(ToolchainError, match="declares packages \\(mocha\\)"):
        workspace_toolchain(ws)


def test_bad_declarations_name_the_file(tmp_path: Path) -> None:
    ws = tmp_path / "p"
    ws.mkdir()
    (ws / "pyproject.toml").write_text('[project]\nname = "p"\nrequires-python = ">=3.99"\n')
    with pytest.raises(ToolchainError, match=r"pyproject\.toml: requires-python '>=3\.99'"):
        workspace_toolchain(ws)
    (ws / "pyproject.toml").write_text("[project\n")
    with pytest.raises(ToolchainError, match=r"pyproject\.toml: cannot read it"):
        workspace_toolchain(ws)
    (ws / "pyproject.toml").write_text(
        '[project]\nname = "p"\n[project.optional-dependencies]\n'
        'test = ["no-such-package-speculate-xyz==0"]\n'
    )
    with pytest.raises(ToolchainError, match="pip install no-such-package-speculate-xyz==0` exited"):
        workspace_toolchain(ws)
    assert workspace_toolchain(None).path == ":".join(SYSTEM_PATH)
