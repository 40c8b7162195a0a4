"""Layer markers are trusted only from the layer's own writer (#34 item 8): a sandboxed command that sets
``user.overlay.whiteout`` on a file or ``user.overlay.opaque`` on a directory (fuse-overlayfs passes them
through to the upper layer) still sees them, and so does the project after acceptance; ``trusted.*`` is
refused. The layer's own whiteout and opaque directory, made by the view before the command, still land.
On every backend, as root and as uid 65534."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from overlayfs.sandbox import sandbox_problem
from tests.mount.conftest import backend_params, require
from tests.sandbox.forged import forge_and_accept
from tests.sandbox.test_escapes import NOBODY, _as_nobody, _code_paths

BACKENDS = backend_params("kernel", "fuse", "fuse-overlayfs")
# gone.txt deleted and old/ replaced by the view; `made` created by the command: nothing else changes.
TREE = ["dd", "dd/real.txt", "made", "old", "old/new.txt", "pkg", "pkg/__init__.py", "top.txt"]
CHANGES = ["added made", "added old/new.txt", "deleted gone.txt", "deleted old/x.txt"]


def check(out: dict) -> None:
    text = str(out["out"])
    assert out["exit"] == 0, text
    assert "seen True ['real.txt'] True" in text, text  # what the command saw
    assert "trusted.overlay.whiteout set" not in text and "trusted.overlay.opaque set" not in text, text
    assert out["changes"] == CHANGES, out
    assert out["promoted"] and out["tree"] == TREE, out  # what it saw is what landed


@pytest.mark.slow
@pytest.mark.privileged
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forged_marker_deletes_nothing_as_root(backend: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root; the normal-user test runs as this user")
    require(backend)
    if (why := sandbox_problem()) is not None:
        pytest.skip(f"no sandbox here: {why}")
    check(forge_and_accept(os.fspath(tmp_path), backend))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forged_marker_deletes_nothing_as_a_normal_user(backend: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:  # already a normal user
        require(backend)
        if (why := sandbox_problem()) is not None:
            pytest.skip(f"no sandbox here: {why}")
        check(forge_and_accept(os.fspath(tmp_path), backend))
        return
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to a normal user")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import sys; sys.exit(sys.version_info < (3, 11))"])
    if probe.returncode != 0:
        pytest.skip("/usr/bin/python3 is missing or older than 3.11: no interpreter a normal user can run")
    base = Path(tempfile.mkdtemp(prefix="speculate-forged-", dir="/var/lib"))  # not /tmp: private there
    try:
        paths = _code_paths(base)
        work = base / "work"
        work.mkdir()
        os.chown(base, NOBODY, NOBODY)
        os.chown(work, NOBODY, NOBODY)
        why = _as_nobody(
            "from overlayfs.mount import unavailable_reason; from overlayfs.sandbox import sandbox_problem; "
            f"print(unavailable_reason({backend!r}) or sandbox_problem() or '')",
            base,
            paths,
        )
        if why.returncode != 0:
            pytest.skip(f"the repository is not importable by uid {NOBODY}: {why.stderr.strip()[-300:]}")
        if why.stdout.strip():
            pytest.skip(f"backend {backend} unavailable to uid {NOBODY}: {why.stdout.strip()}")
        r = _as_nobody(
            "import json, sys; from tests.sandbox.forged import forge_and_accept; "
            f"json.dump(forge_and_accept({os.fspath(work)!r}, {backend!r}), sys.stdout)",
            base,
            paths,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        check(json.loads(r.stdout))
    finally:
        shutil.rmtree(base, ignore_errors=True)
