"""Which commands stop a fork *before* they run (#36 item 3), read off the parse: the git subcommands that
write the repository, and writes the parser sees into protected paths or the instructions files. The
overlay is a real one over a real project; nothing runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from overlayfs import Overlay
from speculate.speculation.guard import Protection, command_boundary


def make_project(tmp: Path, *, git: bool = True) -> Path:
    root = (tmp / "proj").resolve()
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    if git:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


CASES = {
    "git commit -qam fix": ("protected", "`git commit` writes the repository (.git/)"),
    "git add a.txt && git commit -q -m fix": ("protected", "`git add` writes the repository (.git/)"),
    "cd sub && git stash": ("protected", "writes the repository (.git/)"),
    "git config core.fsmonitor planted": ("protected", "writes the repository"),
    "echo planted > .git/hooks/pre-commit": ("protected", "writes .git/hooks/pre-commit"),
    "cp a.txt .claude/settings.json": ("protected", "writes .claude/settings.json"),
    "mkdir -p deploy && echo x > deploy/run.sh": (
        "protected",
        "writes deploy",
    ),  # protectedPaths: the directory
    "echo 'use tabs' >> CLAUDE.md": ("instructions", "writes CLAUDE.md"),
}
RUN_IN_THE_FORK = [
    "git status",
    "git diff --stat",
    "git log -1",
    "echo ok > out.txt",
    "python -m pytest -q",
    "echo x > /tmp/elsewhere.txt",  # outside the project: the sandbox refuses it, no boundary here
]


@pytest.mark.parametrize("cmd", CASES)
def test_a_command_writing_what_cannot_land_is_a_boundary_before_it(tmp_path: Path, cmd: str) -> None:
    root = make_project(tmp_path)
    with Overlay(lower=root) as ov:
        got = command_boundary(cmd, root=root, fs=ov, cwd=root, protection=Protection(["deploy/"]))
    kind, detail = CASES[cmd]
    assert got is not None and got[0] == kind and detail in got[1], got
    assert "runs live on acceptance" in got[1] or kind == "instructions"


@pytest.mark.parametrize("cmd", RUN_IN_THE_FORK)
def test_what_can_land_runs_in_the_fork(tmp_path: Path, cmd: str) -> None:
    root = make_project(tmp_path)
    with Overlay(lower=root) as ov:
        assert command_boundary(cmd, root=root, fs=ov, cwd=root, protection=Protection(["deploy/"])) is None


def test_git_without_a_repository_in_the_project_writes_nothing_here(tmp_path: Path) -> None:
    """No `.git` at or above the command's directory in the project: git fails (or writes outside, which the
    sandbox refuses), so there is nothing to stop before."""
    root = make_project(tmp_path, git=False)
    with Overlay(lower=root) as ov:
        assert (
            command_boundary("git commit -qam fix", root=root, fs=ov, cwd=root, protection=Protection())
            is None
        )


def test_a_nested_repository_is_the_one_written(tmp_path: Path) -> None:
    root = make_project(tmp_path, git=False)
    subprocess.run(["git", "init", "-q"], cwd=root / "sub", check=True)
    with Overlay(lower=root) as ov:
        got = command_boundary(
            "git -C sub commit -qam x", root=root, fs=ov, cwd=root, protection=Protection()
        )
        assert got is not None and "(sub/.git/)" in got[1], got
        assert (
            command_boundary("git commit -qam x", root=root, fs=ov, cwd=root, protection=Protection()) is None
        )
