"""A speculation's scratch space (issue #34 item 5): its commands share one private ``/tmp`` (``$TMPDIR``),
which is gone with the speculation; a write outside the project and that scratch space, and a failure the
live command would not have met, stop the fork at a ``bash`` boundary instead of being accepted as a
failed command. ``speculate check-bash`` says the same of the static cases."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import trio

from overlayfs import Overlay
from overlayfs.mount import available_backends
from speculate.agent_types import BoundaryReached
from speculate.shell import check_bash_main
from speculate.speculation.sandbox_shell import SandboxShell, bash_sandbox
from tests.mount.conftest import backend_params

BACKENDS = backend_params("kernel", "fuse", "fuse-overlayfs")


def _shell(root: Path, backend: str) -> tuple[Overlay, SandboxShell]:
    if backend not in available_backends():
        pytest.skip(f"{backend} is not available here")
    box = bash_sandbox(backend)
    if not box.available:
        pytest.skip(f"speculative Bash on {backend} is {box.line}")
    ov = Overlay(root)
    return ov, SandboxShell(ov, backend)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    r.mkdir()
    (r / "a.txt").write_text("alpha\n")
    return r


def _outside() -> Path:
    """A directory outside the project and /tmp that this user may write on the host."""
    for parent in ("/var/lib", os.path.expanduser("~/.cache")):
        if os.path.isdir(parent) and os.access(parent, os.W_OK):
            return Path(tempfile.mkdtemp(prefix="speculate-scratch-", dir=parent))
    pytest.skip("no writable directory outside /tmp and the project")


def _mounted_at(path: str) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tmp_is_one_scratch_space_for_the_speculation_and_gone_with_it(root: Path, backend: str) -> None:
    name = f"/tmp/speculate-scratch-{os.getpid()}-{backend}"
    ov, shell = _shell(root, backend)

    async def main() -> list[str]:
        out = []
        for command in (
            f"echo scratch > {name} && echo $TMPDIR",
            f"cat {name} > got.txt && cat got.txt",
            'python3 -c "import tempfile; print(tempfile.gettempdir())"',
            f"ls {name}",
        ):
            r = await shell.run(command, timeout=60, cwd=root)
            assert r.exit_code == 0, (command, r.stderr)
            out.append(r.stdout)
        return out

    try:
        assert trio.run(main) == ["/tmp\n", "scratch\n", "/tmp\n", f"{name}\n"]
        assert not os.path.lexists(name)  # the host's /tmp never held it
        assert ov.read_text("got.txt") == "scratch\n"  # what was read from it lands in the project
    finally:
        ov.discard()
    from overlayfs.sandbox.run import scratch_mountpoint

    assert not _mounted_at(scratch_mountpoint()) and not os.listdir(scratch_mountpoint())
    # The next speculation has a scratch space of its own: nothing of the last one is left.
    ov2, shell2 = _shell(root, backend)
    try:
        r = trio.run(lambda: shell2.run(f"test -e {name}; echo $?", timeout=60, cwd=root))
        assert r.stdout == "1\n"
    finally:
        ov2.discard()
    assert not os.path.lexists(name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_outside_the_project_and_the_scratch_space_is_a_bash_boundary(
    root: Path, backend: str
) -> None:
    outside = _outside()
    host_tmp = tempfile.NamedTemporaryFile(dir="/tmp", prefix="speculate-scratch-host-")
    ov, shell = _shell(root, backend)
    cases = [
        # Code the classifier cannot see into: fails with EROFS in the sandbox, would write live.
        f"python3 -c \"open('{outside}/made.txt', 'w').write('x')\"",
        # A compound command that goes on after the refused write and exits 0.
        f"echo y > {outside}/made.txt; echo y >> a.txt; echo went on",
        # /var/tmp is not the scratch space: empty and read-only.
        "echo y > /var/tmp/speculate-scratch-var; true",
        # A file of the host's /tmp, which the scratch space does not show.
        f"cat {host_tmp.name}",
    ]

    async def main() -> None:
        for command in cases:
            with pytest.raises(BoundaryReached) as hit:
                await shell.run(command, timeout=60, cwd=root)
            assert hit.value.kind == "bash" and hit.value.discard, (command, hit.value)
            assert "the live path runs it" in hit.value.detail
        # Inside the project and the scratch space: plain results, failures included.
        r = await shell.run("echo z > /tmp/z && cat /tmp/z && echo z >> a.txt", timeout=60, cwd=root)
        assert r.exit_code == 0 and r.stdout == "z\n", r.stderr
        r = await shell.run("cat /tmp/never-there", timeout=60, cwd=root)
        assert r.exit_code == 1 and "No such file" in r.stderr

    try:
        trio.run(main)
    finally:
        ov.discard()
        host_tmp.close()
        shutil.rmtree(outside)


def _check_bash(command: str, root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert check_bash_main(["--root", str(root), command]) == 0
    return json.loads(capsys.readouterr().out)


def test_check_bash_says_what_the_fork_does_with_these_cases(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scratch writes and reads may run in the sandbox; writes outside it are risky (a fork stops before
    them); what it cannot see into (an interpreter) is sandboxable and stops at the boundary above."""
    assert _check_bash("echo x > /tmp/f; cat /tmp/f", root, capsys)["sandboxable"] is True
    for command in ("echo x > /var/tmp/f", "touch /var/lib/speculate-x", "echo x > ~/f"):
        verdict = _check_bash(command, root, capsys)
        assert verdict["sandboxable"] is False, (command, verdict)
    assert _check_bash('python3 -c \'open("/etc/x", "w")\'', root, capsys)["sandboxable"] is True


SCENARIO = """
name: scratch-and-outside
turns:
  - prompt: "get ready"
    steps:
      - tools:
          - Bash: {command: "true"}
      - text: "Ready."
    suggestion: "write the marker"
  - prompt: "write the marker"
    steps:
      - tools:
          - Bash: {command: "echo note > /tmp/speculate-note-TAG && cat /tmp/speculate-note-TAG > note.txt"}
      - tools:
          - Bash: {command: "python3 -c \\"open('OUTSIDE/made.txt', 'w').write('x')\\""}
      - text: "Done."
    suggestion: null
"""


def test_accepting_a_fork_stopped_by_a_write_outside_runs_the_turn_live(root: Path) -> None:
    """The fork stops at the write it could not make (its overlay discarded); accepting runs the turn live,
    which makes it: the tree and the file outside are what the live turn leaves."""
    from speculate.models.anthropic import AnthropicModel
    from speculate.session import SessionConfig, open_session
    from speculate.sim.scenario_yaml import parse_scenario
    from speculate.sim.server import SimServer

    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    outside = _outside()
    tag = f"{os.getpid()}"
    text = SCENARIO.replace("OUTSIDE", os.fspath(outside)).replace("TAG", tag)

    async def main() -> None:
        with SimServer([parse_scenario(text)], time_scale=0.02) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
                cfg = SessionConfig(
                    project=root, model=model, events_path=root.parent / "events.jsonl", allow=["Bash"]
                )
                async with open_session(cfg) as s:
                    await s.submit("get ready")
                    assert await s.wait_suggestion() == "write the marker"
                    await s.wait_speculation()
                    rec = s.engine._spec.record
                    assert rec.boundary == "bash" and "EROFS" in rec.boundary_detail, rec
                    assert not (outside / "made.txt").exists() and not (root / "note.txt").exists()
                    await s.submit("write the marker")

    try:
        trio.run(main)
        assert (outside / "made.txt").read_text() == "x"  # made by the live turn
        assert (root / "note.txt").read_text() == "note\n"
    finally:
        shutil.rmtree(outside)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"/tmp/speculate-note-{tag}")  # the live turn's, in the host's /tmp
