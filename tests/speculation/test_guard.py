"""What a fork may not leave in its overlay: a write to an execution-config path (git hooks and config,
Claude Code's settings, .mcp.json, .envrc, editor config, ``speculation.protectedPaths``) stops it before a
Write/Edit, before a sandboxed command the parser sees writing one (the command then runs live on
acceptance), and after one it could not see (overlay discarded); so do device nodes, FIFOs, sockets and
symlinks that lead out of the project. None of it lands before acceptance."""

from __future__ import annotations

import json
import os
import socket
import stat
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
from speculate.settings import SettingsError, load_settings
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.guard import Protection, check_overlay, resolved
from speculate.speculation.sandbox_shell import bash_sandbox

from .conftest import tree_hash


def scenario(name: str, call: dict[str, Any]) -> str:
    """Turn 1 reads (a suggestion follows); the suggestion's turn makes ``call``. JSON is YAML."""
    return json.dumps(
        {
            "name": f"guard-{name}",
            "description": "one forked call",
            "turns": [
                {
                    "prompt": f"prepare {name}",
                    "steps": [{"tools": [{"Read": {"file_path": "{root}/a.txt"}}]}, {"text": "Ready."}],
                    "suggestion": name,
                },
                {"prompt": name, "steps": [{"tools": [call]}, {"text": "Done."}], "suggestion": None},
            ],
        }
    )


def write(path: str) -> dict[str, Any]:
    return {"Write": {"file_path": "{root}/" + path, "content": "echo planted\n"}}


def bash(command: str) -> dict[str, Any]:
    return {"Bash": {"command": command}}


PROTECTED = [
    ".git/hooks/pre-commit",
    ".git/config",
    ".claude/settings.json",
    ".mcp.json",
    ".envrc",
    ".vscode/tasks.json",
    ".idea/workspace.xml",
    "deploy/run.sh",
    "sub/.envrc",
]
CALLS: dict[str, dict[str, Any]] = {
    **{f"write {p}": write(p) for p in PROTECTED},
    "edit git config": {
        "Edit": {
            "file_path": "{root}/.git/config",
            "old_string": "[core]",
            "new_string": "[core]\n\tpager = sh -c planted",
        }
    },
    "write through a link": write("hooks/pre-commit"),  # hooks -> .git/hooks, the user's own symlink
    **{f"bash {p}": bash(f"mkdir -p {os.path.dirname(p) or '.'} && echo planted >> {p}") for p in PROTECTED},
    "bash git config": bash("git config core.fsmonitor 'sh -c planted'"),
    "bash git add": bash("git add a.txt"),
    # What the parser cannot see before it runs: the check after the command discards the overlay.
    "bash python writes a hook": bash("python3 -c \"open('.git/hooks/pre-commit', 'a').write('planted')\""),
    "bash git diff": bash("git diff --stat"),  # read-only; it rewrites a stale .git/index
    "make a fifo": bash("python3 -c \"import os; os.mkfifo('fifo')\""),
    "bind a socket": bash("python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\""),
    "make a device": bash(
        "python3 -c \"import os, stat; os.mknod('dev', stat.S_IFCHR | 0o600, os.makedev(1, 3))\""
    ),
    "link out": bash("python3 -c \"import os; os.symlink('/etc/passwd', 'out')\""),
    "link up": bash("python3 -c \"import os; os.symlink('../../..', 'up')\""),
    "dir to link out": bash("rm -rf sub && python3 -c \"import os; os.symlink('/etc', 'sub')\""),
    "link in": bash("python3 -c \"import os; os.symlink('a.txt', 'in')\""),
    "move and delete": bash("mv a.txt moved.txt && rm -rf sub"),
}


def make_project(tmp: Path) -> Path:
    root = tmp / "proj"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "sub").mkdir()
    (root / "sub" / "x.txt").write_text("x\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, env=env)
    (root / "hooks").symlink_to(".git/hooks")
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"speculation": {"protectedPaths": ["deploy/"]}})
    )
    return root


@asynccontextmanager
async def spec_session(root: Path, **cfg: Any) -> AsyncIterator[Session]:
    scenarios = [parse_scenario(scenario(n, c)) for n, c in CALLS.items()]
    with SimServer(scenarios, time_scale=0.02) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(project=root, model=model, user_dir=root.parent / "user", **cfg)
            async with open_session(config) as s:
                yield s


async def speculate(s: Session, name: str) -> Any:
    await s.submit(f"prepare {name}")
    assert await s.wait_suggestion() == name
    await s.wait_speculation()
    return s.engine._spec


def need_sandbox() -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")


@pytest.mark.parametrize("name", [n for n in CALLS if n.startswith(("write ", "edit "))])
def test_a_write_or_edit_of_a_protected_path_stops_the_fork_before_it(tmp_path: Path, name: str) -> None:
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root) as s:
            spec = await speculate(s, name)
            rec = spec.record
            assert (
                rec.boundary == "protected" and "lands only through a normal turn" in rec.boundary_detail
            ), rec
            assert spec.tools_run == 0 and spec.overlay.changes() == []
            assert tree_hash(root) == before
            out = await s.submit(name)  # accepted: nothing was promoted, the normal loop makes the call
            assert out.accepted and out.result is not None and out.speculation.files_written == []

    trio.run(main)


# Commands the parser sees writing a protected path: the fork stops before them (#36 item 3).
SEEN = [n for n in CALLS if n.startswith("bash ") and n not in ("bash git diff", "bash python writes a hook")]


@pytest.mark.slow
@pytest.mark.parametrize("name", SEEN)
def test_a_command_the_parser_sees_writing_a_protected_path_stops_the_fork_before_it(
    tmp_path: Path, name: str
) -> None:
    need_sandbox()
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            spec = await speculate(s, name)
            rec = spec.record
            assert rec.boundary == "protected" and "runs live on acceptance" in rec.boundary_detail, rec
            assert spec.tools_run == 0 and spec.overlay is not None and spec.overlay.changes() == []
            assert tree_hash(root) == before
            out = await s.submit(name)  # accepted: nothing to promote; the command runs live, as typed
            assert out.accepted and out.result is not None and not out.note, out
            assert rec.outcome == "accepted"
            assert out.result.tools_run == 1  # bypassPermissions: the live path ran it, unasked

    trio.run(main)


@pytest.mark.slow
def test_a_command_that_wrote_a_protected_path_unseen_discards_the_overlay(tmp_path: Path) -> None:
    need_sandbox()
    root = make_project(tmp_path)
    before = tree_hash(root)
    name = "bash python writes a hook"

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            spec = await speculate(s, name)
            rec = spec.record
            assert rec.boundary == "protected" and "wrote " in rec.boundary_detail, rec
            assert spec.overlay is None and tree_hash(root) == before
            out = await s.submit(name)  # runs as a normal turn: the command on the real tree, as typed
            assert not out.accepted
            # and says why, on the turn and on the fork's record
            assert "stopped at a boundary (protected: " in out.note and "running normally" in out.note
            assert rec.outcome == "aborted" and rec.reason == out.note

    trio.run(main)


def test_a_read_only_git_command_s_index_refresh_is_dropped_not_a_boundary(tmp_path: Path) -> None:
    need_sandbox()
    root = make_project(tmp_path)
    os.utime(root / "a.txt", ns=(1, 1))  # stat differs from the index: git diff refreshes and rewrites it
    index = (root / ".git" / "index").read_bytes()

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            spec = await speculate(s, "bash git diff")
            assert spec.record.boundary == "complete", spec.record
            assert spec.overlay.changes() == []
            assert (await s.submit("bash git diff")).accepted

    trio.run(main)
    assert (root / ".git" / "index").read_bytes() == index


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "made"),
    [("make a fifo", "fifo"), ("link out", "out"), ("link up", "up"), ("dir to link out", "sub")],
)
def test_a_special_file_or_a_link_out_is_a_boundary_and_never_lands(
    tmp_path: Path, name: str, made: str
) -> None:
    need_sandbox()
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            spec = await speculate(s, name)
            rec = spec.record
            assert rec.boundary == "unsafe_file" and f"made {made}" in rec.boundary_detail, rec
            assert spec.overlay is None and tree_hash(root) == before
            out = await s.submit(name)
            assert not out.accepted

    trio.run(main)


@pytest.mark.parametrize(
    ("name", "made"), [("bind a socket", "sock"), ("make a device", "dev"), ("link in", "in")]
)
def test_what_the_sandbox_refuses_never_exists_and_a_link_inside_lands(
    tmp_path: Path, name: str, made: str
) -> None:
    need_sandbox()
    root = make_project(tmp_path)
    # What the live command would make too (a unix socket; a device node as root) is a failure the live path
    # would not meet: the fork stops there (#34 item 5) and accepting runs the turn live, which makes it.
    live_makes = name != "make a device" or os.geteuid() == 0

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            spec = await speculate(s, name)
            if name == "link in" or not live_makes:
                assert spec.record.boundary == "complete", spec.record
                assert (await s.submit(name)).accepted
            else:
                assert spec.record.boundary == "bash", spec.record
                assert "the live path runs it" in spec.record.boundary_detail
                assert spec.overlay is None and not os.path.lexists(root / made)  # nothing of it landed
                await s.submit(name)

    trio.run(main)
    assert os.path.lexists(root / made) == live_makes
    if name == "link in":
        assert os.readlink(root / "in") == "a.txt"


# -- the check itself, on overlays whose upper layer holds what the sandbox would refuse to make ---------


def test_the_check_refuses_sockets_device_nodes_fifos_and_links_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path)
    made = ["fifo", "link", "sock"] + (["dev"] if os.geteuid() == 0 else [])
    for name in made:
        with Overlay(lower=root) as ov:
            target = ov.upper / name
            if name == "fifo":
                os.mkfifo(target)
            elif name == "link":
                os.symlink("sub/../../outside", target)
            elif name == "sock":
                # Bound by a relative name: the full path (a long TMPDIR or home) may pass AF_UNIX's 108 bytes.
                with monkeypatch.context() as m, socket.socket(socket.AF_UNIX) as sk:
                    m.chdir(ov.upper)
                    sk.bind(name)
            else:
                os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 3))
            with pytest.raises(BoundaryReached) as e:
                check_overlay(ov, ov.changes(), protection=Protection(), command="cmd")
            assert e.value.kind == "unsafe_file" and e.value.discard and f"made {name}" in e.value.detail


def test_protection_matches_at_any_depth_and_through_links(tmp_path: Path) -> None:
    p = Protection(["deploy/", "*.pem"])
    for rel in (
        ".git",
        ".git/hooks/pre-commit",
        "vendor/lib/.git/config",
        ".claude/settings.local.json",
        ".mcp.json",
        "a/.envrc",
        ".vscode/launch.json",
        ".idea/x",
        "deploy/run.sh",
        "keys/server.pem",
    ):
        assert p.kind(rel) == "protected", rel
    for rel in ("CLAUDE.md", ".claude/CLAUDE.md"):
        assert p.kind(rel) == "instructions", rel
    for rel in ("src/git.py", ".gitignore", ".github/workflows/ci.yml", "envrc", "deployment.md", "a.txt"):
        assert p.kind(rel) is None, rel
    root = make_project(tmp_path)
    with Overlay(lower=root) as ov:
        assert resolved(ov, "hooks/pre-commit") == ".git/hooks/pre-commit"
        assert p.of_write(ov, "hooks/pre-commit") == "protected"
        os.symlink("/etc", ov.upper / "etc")  # the overlay API refuses to make it; a command could
        assert resolved(ov, "etc/passwd") is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (["!keep"], "negated patterns are not supported"),
        ([""], "an empty pattern"),
        (["../up"], "stay inside it"),
        ("deploy/", "Input should be a valid list"),
    ],
)
def test_a_bad_protected_paths_setting_names_the_file_and_the_key(
    tmp_path: Path, value: Any, why: str
) -> None:
    (tmp_path / ".claude").mkdir()
    f = tmp_path / ".claude" / "settings.json"
    f.write_text(json.dumps({"speculation": {"protectedPaths": value}}))
    with pytest.raises(SettingsError) as e:
        load_settings(tmp_path, user=tmp_path / "user")
    assert str(e.value).startswith(f"{f}: speculation.protectedPaths") and why in str(e.value)


def test_protected_paths_from_every_settings_file_are_joined(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(
        json.dumps({"speculation": {"protectedPaths": ["a/"]}})
    )
    (tmp_path / ".claude" / "settings.local.json").write_text(
        json.dumps({"speculation": {"protectedPaths": ["b/**", "a/"]}})
    )
    assert load_settings(tmp_path, user=tmp_path / "user").protected_paths == ("a/", "b/**")


def test_an_accepted_fork_s_record_names_deletions_and_renames_as_what_they_are(tmp_path: Path) -> None:
    need_sandbox()
    root = make_project(tmp_path)

    async def main() -> None:
        async with spec_session(root, mode="bypassPermissions") as s:
            await speculate(s, "move and delete")
            out = await s.submit("move and delete")
            rec = out.speculation
            assert out.accepted and rec is not None
            assert (rec.files_renamed, rec.files_deleted, rec.files_written) == (
                ["a.txt -> moved.txt"],
                ["sub/"],
                [],
            )

    trio.run(main)
    assert (root / "moved.txt").read_text() == "alpha\n" and not (root / "sub").exists()
