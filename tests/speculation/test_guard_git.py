"""The guard, complete (#34 item 7): the directory the project's ``core.hooksPath`` names, any directory git
would take for a repository (an embedded bare one with ``core.fsmonitor``), case variants of the sensitive
names, and the hook frameworks: a fork that writes one is stopped, and nothing lands."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from overlayfs import Overlay
from speculate.agent_types import BoundaryReached
from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.gitdirs import git_dir_of, hooks_dir
from speculate.speculation.guard import Protection, check_overlay

from .conftest import tree_hash
from .test_guard import bash, make_project, need_sandbox, scenario, speculate, write

BARE = "vendor/evil"
MAKE_BARE = (
    f"mkdir -p {BARE}/objects {BARE}/refs && echo 'ref: refs/heads/main' > {BARE}/HEAD && "
    f"printf '[core]\\n\\tfsmonitor = sh -c planted\\n' > {BARE}/config"
)
NAMES = [
    ".githooks/pre-commit",  # core.hooksPath = .githooks (set by make_git_project)
    ".GIT/hooks/pre-commit",
    ".Git./config",
    ".Claude/settings.json",
    ".husky/pre-commit",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".devcontainer/devcontainer.json",
]
CALLS: dict[str, dict[str, Any]] = {
    **{f"write {p}": write(p) for p in NAMES},
    **{f"bash {p}": bash(f"mkdir -p {os.path.dirname(p) or '.'} && echo planted >> '{p}'") for p in NAMES},
    "bash bare repo": bash(MAKE_BARE),
    "bash git init bare": bash(f"git init -q --bare {BARE} && git -C {BARE} config core.fsmonitor planted"),
    "write fixture config": write("fixtures/repo.git/config"),  # into a bare repository the project holds
    "bash fixture hook": bash("echo planted > fixtures/repo.git/hooks/post-checkout"),
}


def make_git_project(tmp: Path) -> Path:
    root = make_project(tmp)
    subprocess.run(["git", "config", "core.hooksPath", ".githooks"], cwd=root, check=True)
    subprocess.run(["git", "init", "-q", "--bare", "fixtures/repo.git"], cwd=root, check=True)
    return root


@asynccontextmanager
async def spec_session(root: Path, **cfg: Any) -> AsyncIterator[Session]:
    scenarios = [parse_scenario(scenario(n, c)) for n, c in CALLS.items()]
    with SimServer(scenarios, time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(project=root, model=model, user_dir=root.parent / "user", **cfg)
            async with open_session(config) as s:
                yield s


@pytest.mark.parametrize("name", [n for n in CALLS if n.startswith("write ")])
def test_a_write_git_or_a_hook_framework_would_run_stops_the_fork_before_it(
    tmp_path: Path, name: str
) -> None:
    root = make_git_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, name)
            rec = spec.record
            assert rec.boundary == "protected", rec
            assert spec.tools_run == 0 and spec.overlay.changes() == []
            assert tree_hash(root) == before

    trio.run(main)


# A bare repository made piece by piece is one only once its last piece exists: seen after the command.
UNSEEN = {"bash bare repo"}


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in CALLS if n.startswith("bash ")])
def test_a_command_that_wrote_where_git_or_a_hook_framework_runs_is_stopped(
    tmp_path: Path, name: str
) -> None:
    need_sandbox()
    root = make_git_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            spec = await speculate(s, name)
            rec = spec.record
            assert rec.boundary == "protected", rec
            if name in UNSEEN:  # after it: discarded, nothing can land
                assert "wrote " in rec.boundary_detail and spec.overlay is None, rec
            else:  # before it (the parser saw the write): the command never ran in the fork
                assert "runs live on acceptance" in rec.boundary_detail and spec.tools_run == 0, rec
                assert spec.overlay.changes() == []
            assert tree_hash(root) == before

    trio.run(main)


# -- the pieces ------------------------------------------------------------------------------------------


def test_hooks_path_is_read_from_git_and_from_the_config_file(tmp_path: Path) -> None:
    root = make_git_project(tmp_path)
    assert hooks_dir(root) == ".githooks"
    subprocess.run(["git", "config", "core.hooksPath", str(root / "tools" / "hooks")], cwd=root, check=True)
    assert hooks_dir(root) == "tools/hooks"  # absolute, inside the project
    subprocess.run(["git", "config", "core.hooksPath", "/usr/share/hooks"], cwd=root, check=True)
    assert hooks_dir(root) is None  # outside: a fork cannot write there
    subprocess.run(["git", "config", "--unset", "core.hooksPath"], cwd=root, check=True)
    assert hooks_dir(root) is None
    # included from another file (git reads includes; so does the fallback below)
    (root / ".git" / "extra").write_text("[core]\n\thooksPath = ci/hooks\n")
    subprocess.run(["git", "config", "include.path", "extra"], cwd=root, check=True)
    assert hooks_dir(root) == "ci/hooks"
    # where git itself is not available: the config file and its includes, read directly
    from speculate.speculation import gitdirs

    assert gitdirs._from_files(root) == "ci/hooks"


def test_protection_covers_the_hooks_dir_case_folded(tmp_path: Path) -> None:
    root = make_git_project(tmp_path)
    p = Protection(root=root)
    for rel in (".githooks", ".githooks/pre-commit", ".GitHooks/pre-push", ".GIT/hooks/x", ".Claude/s.json"):
        assert p.kind(rel) == "protected", rel
    for rel in ("githooks/pre-commit", "src/.githooks.md", "a.txt"):
        assert p.kind(rel) is None, rel
    assert Protection().kind(".githooks/pre-commit") is None  # unbound: no project to read it from


def test_a_directory_git_takes_for_a_repository_is_protected(tmp_path: Path) -> None:
    root = make_git_project(tmp_path)
    (root / "notes").mkdir()
    (root / "notes" / "HEAD").write_text("not a repository\n")  # HEAD alone is an ordinary file
    with Overlay(lower=root) as ov:
        assert git_dir_of(ov, "fixtures/repo.git/config") == "fixtures/repo.git"
        assert git_dir_of(ov, "notes/HEAD") is None
        # a Write that would complete one: HEAD beside an existing objects/
        ov.mkdir("vendor/evil/objects", parents=True)
        assert Protection().of_write(ov, "vendor/evil/HEAD") == "protected"
        assert Protection().of_write(ov, "vendor/ok/HEAD") is None
        ov.write_text("vendor/evil/HEAD", "ref: refs/heads/main\n")
        with pytest.raises(BoundaryReached) as e:
            check_overlay(ov, ov.changes(), protection=Protection(), command="cmd")
        assert e.value.kind == "protected" and e.value.discard and "vendor/evil" in e.value.detail
