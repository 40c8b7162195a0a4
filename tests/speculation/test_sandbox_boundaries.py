"""Speculative Bash meets the sandbox's rules: no sandbox means no Bash at all, a write past the upper
layer's bound is a ``resource`` boundary (and nothing of it is promoted), a dead FUSE server an ``error``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio

from overlayfs.mount import MNT_PREFIX
from overlayfs.sandbox import SandboxLimits
from speculate.speculation.sandbox_shell import bash_sandbox
from speculate.speculation.stats import stats_main

from .conftest import engine_session, make_project, tree_hash


def _need_sandbox(backend: str = "auto") -> str:
    box = bash_sandbox(backend)
    if not box.available:
        pytest.skip(f"speculative Bash is {box.line}")
    assert box.backend is not None
    return box.backend


def test_without_a_sandbox_even_a_read_only_command_is_a_boundary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    before = tree_hash(root)

    async def main() -> None:
        async with engine_session(root, overlay_backend="pure") as (s, _):
            await s.submit("show the files for cat a with bash")
            assert await s.wait_suggestion() == "cat a with bash"
            await s.wait_speculation()
            rec = s.engine._spec.record
            assert rec.boundary == "bash" and "speculative Bash is off" in rec.boundary_detail
            assert s.engine._spec.tools_run == 0  # nothing ran, not even `cat`
            assert rec.bash.startswith("off (") and "pure" in rec.bash
            assert tree_hash(root) == before
            await s.engine.ignore()
            await s.submit("cat a with bash")  # a second speculation-free turn: still said only once

    trio.run(main)
    assert stats_main([str(root.parent / "events.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert (
        len(err) == 1
        and err[0].startswith("speculate stats: speculative Bash was off (")
        and "pure" in err[0]
    )


def test_writing_past_the_upper_bound_is_a_resource_boundary(tmp_path: Path) -> None:
    _need_sandbox()
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        limits = SandboxLimits(upper_bytes=8 << 20)
        async with engine_session(root, sandbox_limits=limits) as (s, _):
            await s.submit("show the files for write big files")
            assert await s.wait_suggestion() == "write big files"
            await s.wait_speculation()
            spec = s.engine._spec
            assert spec.record.boundary == "resource", spec.record
            assert "upper layer reached its bound of 8388608 bytes" in spec.record.boundary_detail
            assert spec.overlay is None  # discarded at once: over its bound, nothing of it may land
            assert tree_hash(root) == before
            out = await s.submit("write big files")  # the user takes it anyway: it runs normally
            assert not out.accepted and out.result is not None
            assert tree_hash(root) == before  # the normal loop's Bash had no one to approve it

    trio.run(main)


def test_a_write_tool_past_the_upper_bound_is_a_resource_boundary(tmp_path: Path) -> None:
    """The file tools write the fork's bounded upper layer too: a Write that does not fit stops the fork."""
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        limits = SandboxLimits(upper_bytes=8 << 10)
        async with engine_session(root, sandbox_limits=limits, mode="acceptEdits") as (s, _):
            await s.submit("show the files for write a big file")
            assert await s.wait_suggestion() == "write a big file"
            await s.wait_speculation()
            spec = s.engine._spec
            assert spec.record.boundary == "resource", spec.record
            assert "upper layer reached its bound of 8192 bytes" in spec.record.boundary_detail
            assert spec.overlay is None  # discarded at once
            assert tree_hash(root) == before

    trio.run(main)


@pytest.mark.fuse
def test_a_fuse_server_dying_under_a_command_is_an_error_boundary(tmp_path: Path) -> None:
    _need_sandbox("fuse")
    root = make_project(tmp_path)
    before = tree_hash(root)

    async def main() -> None:
        async with engine_session(root, overlay_backend="fuse") as (s, _):
            await s.submit("show the files for sleep then read")
            assert await s.wait_suggestion() == "sleep then read"
            for _ in range(500):  # the FUSE server of this speculation's command, once it serves the mount
                pids = subprocess.run(
                    ["pgrep", "-f", f"overlayfs.fuse .*--owner-pid {os.getpid()}"],
                    capture_output=True,
                    text=True,
                ).stdout.split()
                if pids and f"{MNT_PREFIX}{os.getpid()}-" in Path("/proc/self/mountinfo").read_text():
                    break
                await trio.sleep(0.01)
            else:
                raise AssertionError("the speculation never mounted its overlay")
            for _ in range(500):  # the command is sleeping inside the view (seen, not assumed after a timer)
                if subprocess.run(["pgrep", "-fx", "sleep 1.5"], capture_output=True).returncode == 0:
                    break
                await trio.sleep(0.01)
            else:
                raise AssertionError("the speculated command never started its sleep")
            for pid in pids:
                os.kill(int(pid), 9)
            await s.wait_speculation()
            rec = s.engine._spec.record
            assert rec.boundary == "error" and "backend failed" in rec.boundary_detail, rec
            assert tree_hash(root) == before

    trio.run(main)
