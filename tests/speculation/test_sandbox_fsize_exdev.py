"""Speculative Bash at two edges of the overlay sandbox: a file past RLIMIT_FSIZE is a ``resource`` boundary
(not a failed command the model goes on from), and a directory rename, which every mounted backend answers
with EXDEV, is a boundary when it fails (``mv`` copies instead, and lands)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from overlayfs import Overlay
from overlayfs.mount import available_backends
from overlayfs.sandbox import SandboxLimits
from speculate.agent_types import BoundaryReached
from speculate.speculation.sandbox_shell import SandboxShell, bash_sandbox
from tests.mount.conftest import backend_params

MiB = 1 << 20


def _shell(root: Path, backend: str, **limits: int) -> tuple[Overlay, SandboxShell]:
    box = bash_sandbox(backend)
    if not box.available:
        pytest.skip(f"speculative Bash on {backend} is {box.line}")
    ov = Overlay(root)
    return ov, SandboxShell(ov, backend, limits=SandboxLimits(**limits) if limits else None)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / "d").mkdir(parents=True)
    (r / "d" / "f.txt").write_text("in d\n")
    return r


@pytest.mark.parametrize(
    "command",
    [
        "head -c 2097152 /dev/zero > /tmp/big",  # killed by SIGXFSZ: bash says exit 153
        "python3 -c \"open('/tmp/big', 'wb').write(bytes(2 * 1024 * 1024))\"",  # Python ignores it: EFBIG
    ],
)
def test_a_file_past_the_size_bound_is_a_resource_boundary(root: Path, command: str) -> None:
    ov, shell = _shell(root, "auto", upper_bytes=1 * MiB)

    async def main() -> None:
        with pytest.raises(BoundaryReached) as hit:
            await shell.run(command, timeout=60)
        assert hit.value.kind == "resource" and hit.value.discard
        assert "file size bound of 1048576 bytes (RLIMIT_FSIZE)" in hit.value.detail
        # Within the bound the same commands are plain results.
        out = await shell.run(
            command.replace("2097152", "4096").replace("2 * 1024 * 1024", "4096"), timeout=60
        )
        assert out.exit_code == 0, out.stderr

    try:
        trio.run(main)
    finally:
        ov.discard()


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse", "fuse-overlayfs"))
def test_a_directory_rename_refused_with_exdev_stops_the_fork_and_mv_lands(root: Path, backend: str) -> None:
    if backend not in available_backends():
        pytest.skip(f"{backend} is not available here")
    ov, shell = _shell(root, backend)

    async def main() -> None:
        with pytest.raises(BoundaryReached) as hit:
            await shell.run("python3 -c \"import os; os.rename('d', 'e')\"", timeout=60)
        assert hit.value.kind == "bash" and hit.value.discard and "EXDEV" in hit.value.detail
        out = await shell.run("mv d e && cat e/f.txt", timeout=60)  # mv copies when rename(2) says EXDEV
        assert out.exit_code == 0 and out.stdout == "in d\n", out.stderr

    try:
        trio.run(main)
        assert not ov.promote().conflicts
    finally:
        ov.discard()
    assert (root / "e" / "f.txt").read_text() == "in d\n" and not (root / "d").exists()
