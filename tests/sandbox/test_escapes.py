"""The escape suite: every attempt of :mod:`tests.sandbox.escapes` on every backend, as root and as a
normal user (uid 65534 through ``setpriv``), plus the control that shows the checks catch a real escape."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from overlayfs.sandbox import sandbox_problem
from tests.mount.conftest import backend_params, require
from tests.sandbox.escapes import ATTEMPTS, CONTROL, Outcome, run_all, workspace_parent

REPO = Path(__file__).resolve().parents[2]
BACKENDS = backend_params("kernel", "fuse", "fuse-overlayfs")
AREAS = {
    "writes",
    "mounts",
    "namespaces",
    "processes",
    "ipc",
    "network",
    "links",
    "devices",
    "exhaustion",
    "environment",
}
NOBODY = 65534


def _need_workspace() -> None:
    """The escape runner's scratch directory must be one the sandbox sees: a normal user's ~/.cache is, unless
    that home is under /tmp, /var/tmp or /run (private in the sandbox)."""
    if workspace_parent() is None:
        pytest.skip(
            "no writable directory the sandbox sees at its real path (/var/lib, ~/.cache): "
            "set SPECULATE_ESCAPE_BASE to one"
        )


def _failures(out: list[Outcome]) -> str:
    return "\n".join(
        f"{o.name} ({o.area}): {o.why}\n    output: {o.output[-300:]!r}" for o in out if not o.contained
    )


def test_the_suite_covers_every_area() -> None:
    assert len(ATTEMPTS) >= 40
    assert {a.area for a in ATTEMPTS} == AREAS
    assert len({a.name for a in ATTEMPTS}) == len(ATTEMPTS)


@pytest.mark.slow
@pytest.mark.privileged
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_escape_is_contained_as_root(backend: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root; test_every_escape_is_contained_as_a_normal_user runs as this user")
    require(backend)
    assert sandbox_problem() is None, sandbox_problem()
    out = run_all(backend)
    assert len(out) == len(ATTEMPTS)
    assert all(o.contained for o in out), _failures(out)


@pytest.mark.slow
@pytest.mark.privileged
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_escape_is_contained_as_root_on_another_users_project(backend: str) -> None:
    """Root's commands on a uid-1000 project keep root's file capabilities (a namespace mapping every id):
    nothing more may escape for it."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    require(backend)
    assert sandbox_problem() is None, sandbox_problem()
    out = run_all(backend, owner=1000)
    assert len(out) == len(ATTEMPTS)
    assert all(o.contained for o in out), _failures(out)


# What the escape runner imports, as uid 65534 will import it (the FUSE server and seccomp included).
RUNNER_IMPORTS = (
    "import pyseccomp, trio, overlayfs.fuse.ops, overlayfs.sandbox.seccomp, tests.sandbox.escapes"
)


def _code_paths(base: Path, imports: str = RUNNER_IMPORTS) -> list[str]:
    """Where uid 65534 imports the repository and the venv's packages from: in place when it can read
    them, else a copy of just what ``imports`` (the runner's by default) imports, made in ``base`` (a clone
    under a 0700 directory, such as ``mktemp -d``, is unreadable to that user, and its normal-user tests
    would only be skipped)."""
    site = next(Path(REPO, ".venv", "lib").glob("python3*/site-packages"), None)
    roots = [REPO, *([site] if site else [])]
    readable = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "test",
            "-r",
            os.fspath(REPO / "overlayfs" / "__init__.py"),
        ]
    )
    if readable.returncode == 0:
        return [os.fspath(r) for r in roots]
    files = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; {imports}; print('\\n'.join("
            "m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    out = []
    for i, root in enumerate(roots):
        dest = base / f"code{i}"
        dest.mkdir()
        tops = {Path(f).relative_to(root).parts[0] for f in files if Path(f).is_relative_to(root)}
        for top in tops:  # a package directory or a single module (or extension) file
            (shutil.copytree if (root / top).is_dir() else shutil.copy)(root / top, dest / top)
        out.append(os.fspath(dest))
    subprocess.run(["chmod", "-R", "a+rX", os.fspath(base)], check=True)
    return out


def _as_nobody(code: str, base: Path, paths: list[str]) -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` as uid 65534 with ``paths`` importable (the venv's interpreter may live in
    root's home, which that user cannot read: Debian's python3 runs it)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.fspath(base),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(paths),
        "SPECULATE_ESCAPE_BASE": os.fspath(base),
    }
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            code,
        ],
        env=env,
        cwd=base,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_escape_is_contained_as_a_normal_user(backend: str) -> None:
    if os.geteuid() != 0:  # already a normal user
        require(backend)
        _need_workspace()
        out = run_all(backend)
        assert all(o.contained for o in out), _failures(out)
        return
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to a normal user")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import sys; sys.exit(sys.version_info < (3, 11))"])
    if probe.returncode != 0:
        pytest.skip("/usr/bin/python3 is missing or older than 3.11: no interpreter a normal user can run")
    base = Path(tempfile.mkdtemp(prefix="speculate-escape-user-", dir="/var/lib"))
    try:
        paths = _code_paths(base)
        os.chown(base, NOBODY, NOBODY)
        why = _as_nobody(
            "import sys; from overlayfs.mount import unavailable_reason; "
            "from overlayfs.sandbox import sandbox_problem; "
            f"print(unavailable_reason({backend!r}) or sandbox_problem() or '')",
            base,
            paths,
        )
        if why.returncode != 0:
            pytest.skip(f"the repository is not importable by uid {NOBODY}: {why.stderr.strip()[-300:]}")
        if why.stdout.strip():
            pytest.skip(f"backend {backend} unavailable to uid {NOBODY}: {why.stdout.strip()}")
        r = _as_nobody(
            f"import json, sys; from dataclasses import asdict; from tests.sandbox.escapes import "
            f"run_all; json.dump([asdict(o) for o in run_all({backend!r})], sys.stdout)",
            base,
            paths,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        out = [Outcome(**o) for o in json.loads(r.stdout)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert len(out) == len(ATTEMPTS)
    assert all(o.contained for o in out), _failures(out)


def test_the_checks_catch_an_escape_when_there_is_no_sandbox() -> None:
    """The control: the same attempts run with plain bash must be flagged, or the suite proves nothing."""
    _need_workspace()
    out = {o.name: o for o in run_all("none")}
    needs_root = {"etc", "var-lib", "symlink-out", "proc-self-root", "dev-fd-dotdot"}
    expected = set(CONTROL) if os.geteuid() == 0 else set(CONTROL) - needs_root
    caught = {name for name, o in out.items() if not o.contained}
    assert caught >= expected, {n: out[n].why for n in expected - caught}
    assert not any(Path("/etc").glob("speculate-escape-*")), "the control left a file in /etc"


def test_escape_runner_is_usable_as_a_script() -> None:
    _need_workspace()
    r = subprocess.run(
        [sys.executable, "-m", "tests.sandbox.escapes", "--backend", "none", "--only", "bashrc"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    [o] = json.loads(r.stdout)
    assert o["name"] == "bashrc" and not o["contained"] and "changed on the host" in o["why"]
