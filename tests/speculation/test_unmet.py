"""Which failures on a sandboxed command's stderr the live command would not have met
(:func:`speculate.speculation.unmet.unmet_failure`), told from the messages real tools print; the host is
asked what the live command would have met."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from speculate.speculation.unmet import EACCES, ENOENT, EROFS, unmet_failure


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    (p / "c.txt").write_text("gamma\n")
    return p


def _writable_outside() -> Path:
    """A directory outside /tmp this user may write on the host (where the sandbox refuses with EROFS)."""
    for parent in ("/var/lib", os.path.expanduser("~/.cache"), "/var/tmp"):
        if os.path.isdir(parent) and os.access(parent, os.W_OK):
            return Path(tempfile.mkdtemp(prefix="speculate-unmet-", dir=parent))
    pytest.skip("no writable directory outside /tmp")


@pytest.mark.parametrize(
    "line",
    [
        "touch: cannot touch '{d}/x': Read-only file system",
        "/bin/bash: line 1: {d}/x: Read-only file system",
        "OSError: [Errno 30] Read-only file system: '{d}/x'",
        "mkdir: cannot create directory ‘{d}/x’: Read-only file system",
        "go: creating work dir: mkdir {d}/x: read-only file system",  # Go and Rust: lower case
    ],
)
def test_a_write_outside_the_host_allows_is_unmet_whatever_the_exit_status(project: Path, line: str) -> None:
    d = _writable_outside()
    try:
        for code in (0, 1):
            u = unmet_failure(line.format(d=d), code, project=str(project), cwd=str(project))
            assert u is not None and u.kind == EROFS and u.path == f"{d}/x", (line, code)
            assert "outside the project" in u.words()
    finally:
        os.rmdir(d)


def _read_only_mount() -> str | None:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if "ro" in fields[5].split(",") and os.path.isdir(fields[4]):
                return fields[4].replace("\\040", " ")
    return None


def test_a_write_the_host_refuses_too_is_not_unmet(project: Path) -> None:
    """A file system the host mounts read-only refuses the live command too; a normal user may not write
    /etc live either."""
    ro = _read_only_mount()
    if ro is not None:
        line = f"touch: cannot touch '{ro}/x': Read-only file system"
        assert unmet_failure(line, 1, project=str(project), cwd="/") is None
    if os.geteuid() != 0:
        line = "touch: cannot touch '/etc/x': Read-only file system"
        assert unmet_failure(line, 1, project=str(project), cwd="/") is None


def test_a_host_file_the_scratch_tmp_hides_is_unmet_when_the_command_fails(project: Path) -> None:
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="speculate-unmet-") as f:
        line = f"cat: {f.name}: No such file or directory"
        u = unmet_failure(line, 1, project=str(project), cwd=str(project))
        assert u is not None and u.kind == ENOENT and u.path == f.name
        assert unmet_failure(line, 0, project=str(project), cwd=str(project)) is None  # it went on without
    gone = f"cat: {f.name}: No such file or directory"  # missing on the host too: the live run fails alike
    assert unmet_failure(gone, 1, project=str(project), cwd=str(project)) is None
    missing = "cat: missing.txt: No such file or directory"  # in the project: the view is the project
    assert unmet_failure(missing, 1, project=str(project), cwd=str(project)) is None


def test_root_refused_in_the_project_is_unmet_a_normal_user_is_not(project: Path) -> None:
    for line in (
        "bash: line 1: c.txt: Permission denied",
        "sed: couldn't open temporary file ./sedAb12Cd: Permission denied",
    ):
        u = unmet_failure(line, 0, project=str(project), cwd=str(project), root=True)
        assert u is not None and u.kind == EACCES and u.path is not None
        assert u.path.startswith(str(project)), u
        assert unmet_failure(line, 1, project=str(project), cwd=str(project), root=False) is None


def test_a_refusal_naming_no_path_is_unmet_only_when_the_command_failed(project: Path) -> None:
    line = "PermissionError: [Errno 13] Permission denied"  # socket(AF_UNIX) in the sandbox
    assert unmet_failure(line, 1, project=str(project), cwd=str(project)) is not None
    assert unmet_failure(line, 0, project=str(project), cwd=str(project)) is None


def test_a_privileged_call_refused_to_a_normal_user_is_refused_live_too(project: Path) -> None:
    line = "PermissionError: [Errno 1] Operation not permitted"  # mknod of a device, chown
    kw = {"project": str(project), "cwd": str(project)}
    assert unmet_failure(line, 1, root=False, **kw) is None
    assert unmet_failure(line, 1, root=True, **kw) is not None


def test_output_that_only_mentions_an_error_on_stdout_is_not_read(project: Path) -> None:
    """Only stderr is read; a grep of the project for the words prints them on stdout."""
    assert unmet_failure("", 1, project=str(project), cwd=str(project)) is None
