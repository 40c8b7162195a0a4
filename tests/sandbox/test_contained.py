"""What the sandbox does with ordinary commands: the classifier's sandboxable corpus run for real with the
host unchanged, a FUSE server killed under a command, the upper-layer bound, secrets kept out, cancel."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from overlayfs import Overlay
from overlayfs.bounded import LayerBound
from overlayfs.mount import open_mount
from overlayfs.sandbox import BACKEND_FAILED_EXIT, CancelToken, SandboxLimits, run_sandboxed, sandbox_problem
from tests.mount.conftest import backend_params, kill_server_mid_command, require
from tests.sandbox.escapes import digest
from tests.shell.test_corpus import CASES, ROOT_MARK, build_project

SANDBOXABLE = [cmd for label, cmd in CASES if label == "sandboxable"]


@pytest.fixture(scope="module")
def visible_base() -> Iterator[Path]:
    """Outside /tmp and /var/tmp (private in the sandbox), so the project and home are the real ones."""
    parent = Path("/var/lib") if os.access("/var/lib", os.W_OK) else Path.home() / ".cache"
    parent.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="speculate-contained-", dir=parent))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _backend() -> str:
    for b in ("kernel", "fuse"):
        try:
            require(b)
        except pytest.skip.Exception:
            continue
        return b
    pytest.skip("no mount backend here")


@pytest.mark.slow
def test_the_sandboxable_corpus_runs_with_the_host_unchanged(visible_base: Path) -> None:
    backend = _backend()
    if sandbox_problem() is not None:
        pytest.skip(f"no sandbox here: {sandbox_problem()}")
    project = build_project(visible_base / "corpus" / "proj")
    home = visible_base / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    watched = [project, home, Path("/etc"), Path("/usr/local/bin")]

    def names(p: Path) -> list[str]:  # /etc and /usr/local/bin: their entries (contents are large)
        return sorted(os.listdir(p))

    before = {p: digest(os.fspath(p)) if p in (project, home) else names(p) for p in watched}
    assert len(SANDBOXABLE) >= 100
    ran = 0
    for cmd in SANDBOXABLE:
        ov = Overlay(project)
        try:
            r = run_sandboxed(
                ov,
                cmd.replace(ROOT_MARK, str(project)),
                timeout=5,
                backend=backend,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.fspath(home)},
            )
        finally:
            ov.discard()
        assert r.limit is None and r.backend_failed is None, (cmd, r)
        ran += 1
        after = {p: digest(os.fspath(p)) if p in (project, home) else names(p) for p in watched}
        assert after == before, (
            f"{cmd!r} changed the host: {[str(p) for p in watched if after[p] != before[p]]}"
        )
    assert ran == len(SANDBOXABLE)


@pytest.fixture
def project(visible_base: Path, tmp_path: Path) -> Path:
    root = Path(tempfile.mkdtemp(dir=visible_base)) / "proj"
    root.mkdir()
    (root / "README.md").write_text("# hi\n")
    return root


@pytest.mark.fuse
def test_a_killed_fuse_server_is_a_backend_failure_not_exit_0(project: Path) -> None:
    require("fuse")
    ov = Overlay(project, bound=LayerBound())  # a mount handed to the sandbox must be of a bounded layer
    m = open_mount(ov, "fuse")
    try:
        assert m._proc is not None
        r = kill_server_mid_command(
            lambda cmd: run_sandboxed(ov, cmd, timeout=60, mount=m),
            m._proc.kill,
            after="cat README.md; ls; echo still-here",
        )
    finally:
        m.close()
        ov.discard()
    assert "still-here" in r.stdout  # the shell itself carried on and would have said 0
    assert r.backend_failed is not None and "exited" in r.backend_failed
    assert r.exit_code == BACKEND_FAILED_EXIT
    assert "backend failed" in r.stderr


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse"))
def test_environment_secrets_do_not_enter(
    backend: str, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An allow-list: what a shell and a toolchain need enters, anything else stays out, whatever its name."""
    require(backend)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-never-inside")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-never-inside")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:never-inside@db/app")  # no deny-list would catch it
    monkeypatch.setenv("SPECULATE_HARMLESS", "not-passed-either")
    monkeypatch.setenv("VIRTUAL_ENV", "/opt/some-venv")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    ov = Overlay(project)
    try:
        r = run_sandboxed(ov, "env", timeout=20, backend=backend)
    finally:
        ov.discard()
    assert "VIRTUAL_ENV=/opt/some-venv" in r.stdout and "LC_TIME=C.UTF-8" in r.stdout and "PATH=" in r.stdout
    assert "never-inside" not in r.stdout and "SPECULATE_HARMLESS" not in r.stdout


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse"))
def test_a_speculation_s_shell_passes_what_the_session_and_the_settings_name(
    backend: str, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SandboxShell (speculative Bash and a fork's hooks): the allow-list, the names in settings
    (speculation.env), the session's own variables (tool_env) and a hook's (CLAUDE_PROJECT_DIR)."""
    import trio

    from speculate.speculation.sandbox_shell import SandboxShell

    require(backend)
    monkeypatch.setenv("DATABASE_URL", "postgres://app:never-inside@db/app")
    monkeypatch.setenv("BUILD_FLAVOUR", "debug")
    ov = Overlay(project)
    shell = SandboxShell(
        ov, backend, env={"PATH": "/usr/bin:/bin", "PINNED": "by-the-session"}, passed_env=["BUILD_FLAVOUR"]
    )
    try:
        r = trio.run(lambda: shell.run("env", timeout=20, env={"CLAUDE_PROJECT_DIR": str(project)}))
    finally:
        ov.discard()
    assert r.exit_code == 0, r.stderr
    seen = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert seen["BUILD_FLAVOUR"] == "debug" and seen["PINNED"] == "by-the-session"
    assert seen["PATH"] == "/usr/bin:/bin" and seen["CLAUDE_PROJECT_DIR"] == str(project)
    assert "never-inside" not in r.stdout


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse"))
def test_cancel_kills_at_once_and_is_reported(backend: str, project: Path) -> None:
    require(backend)
    ov = Overlay(project)
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    t0 = time.monotonic()
    try:
        r = run_sandboxed(ov, "sleep 30; echo late > late.txt", timeout=60, backend=backend, cancel=token)
    finally:
        changes = ov.changes()
        ov.discard()
    assert r.cancelled and not r.timed_out and r.exit_code != 0
    assert time.monotonic() - t0 < 10  # killed, not waited for
    assert changes == []


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="upper_bytes"):
        SandboxLimits(upper_bytes=0)
    with pytest.raises(ValueError, match="processes"):
        SandboxLimits(processes=-1)


@pytest.mark.privileged
def test_a_concurrent_commands_sweep_leaves_a_live_leaf_cgroup() -> None:
    """Many sandboxed commands of one process (the bench runs six sessions): a command's sweep of leftover
    leaves must not remove another's leaf before that one has joined it (its setup then failed, exit 125)."""
    from overlayfs.sandbox.limits import open_cgroup

    with open_cgroup(processes=64, memory_bytes=1 << 28) as first:
        if not first.dirs:
            pytest.skip("no leaf cgroup can be made here (not root, or no writable cgroupfs)")
        with open_cgroup(processes=64, memory_bytes=1 << 28) as second:  # sweeps on the way in
            assert second.dirs and all(d.is_dir() for d in first.dirs)
    assert not any(d.exists() for d in [*first.dirs, *second.dirs])


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse"))
def test_a_sandbox_that_cannot_be_entered_is_an_error_not_an_exit_status(
    backend: str, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If stage one cannot join its cgroup (or mount, or set limits) the command never ran: that is raised,
    not returned as exit 125 for the model to read as the command's failure."""
    import contextlib

    import overlayfs.sandbox.run as run
    from overlayfs.sandbox import SandboxSetupFailed
    from overlayfs.sandbox.limits import Cgroup

    require(backend)

    @contextlib.contextmanager
    def gone(**_: object) -> Iterator[Cgroup]:
        yield Cgroup(procs=[str(project.parent / "no-such-cgroup" / "cgroup.procs")])

    monkeypatch.setattr(run, "open_cgroup", gone)
    ov = Overlay(project)
    try:
        with pytest.raises(SandboxSetupFailed, match=r"sandbox setup failed: .*no-such-cgroup"):
            run_sandboxed(ov, "echo ran > ran.txt", timeout=20, backend=backend)
        assert ov.changes() == []
    finally:
        ov.discard()
