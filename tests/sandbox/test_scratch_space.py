"""A speculation's scratch space (#34 item 5), through the sandbox itself on every backend, as root and as
uid 65534: its commands share one ``/tmp`` (``$TMPDIR``), gone with the speculation and mounted nowhere on
the host; ``/var/tmp`` and ``/run`` refuse writes (EROFS), which the fork's shell then tells from a live
failure as the host would (tests/speculation/test_scratch.py runs the fork's side)."""

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
from tests.sandbox.scratch import scratch_run
from tests.sandbox.test_escapes import NOBODY, REPO, _as_nobody, _code_paths

BACKENDS = backend_params("kernel", "fuse", "fuse-overlayfs")
UNMET = REPO / "speculate" / "speculation" / "unmet.py"


def check(out: dict) -> None:
    codes = [o[0] for o in out["outs"]]
    stdouts = [o[1] for o in out["outs"]]
    assert codes == [0, 0, 0, 0], out["outs"]
    assert stdouts == ["/tmp\n", "scratch\n", "1\n", "1\n"], out["outs"]
    assert "Read-only file system" in out["outs"][2][2] and "Read-only file system" in out["outs"][3][2]
    assert out["after"] == "1\n", out  # the next speculation's /tmp holds nothing of the last one
    assert not out["mounted"] and out["left"] == [], out  # nothing of it on the host
    # A write the host allows is one the live command makes; /etc refuses a normal user live too.
    assert out["judged"] == {"own": True, "etc": out["root"]}, out


@pytest.mark.privileged
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_scratch_tmp_per_speculation_as_root(backend: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root; the normal-user test runs as this user")
    require(backend)
    if (why := sandbox_problem()) is not None:
        pytest.skip(f"no sandbox here: {why}")
    work = Path(tempfile.mkdtemp(prefix="speculate-scratch-", dir="/var/lib"))  # not /tmp: private there
    try:
        check(scratch_run(os.fspath(work), backend, os.fspath(UNMET)))
    finally:
        shutil.rmtree(work)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_scratch_tmp_per_speculation_as_a_normal_user(backend: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:  # already a normal user
        require(backend)
        if (why := sandbox_problem()) is not None:
            pytest.skip(f"no sandbox here: {why}")
        check(scratch_run(os.fspath(tmp_path), backend, os.fspath(UNMET)))
        return
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to a normal user")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import sys; sys.exit(sys.version_info < (3, 11))"])
    if probe.returncode != 0:
        pytest.skip("/usr/bin/python3 is missing or older than 3.11: no interpreter a normal user can run")
    base = Path(tempfile.mkdtemp(prefix="speculate-scratch-user-", dir="/var/lib"))
    try:
        paths = _code_paths(base)
        unmet = base / "unmet.py"
        shutil.copy(UNMET, unmet)
        work = base / "work"
        work.mkdir()
        for p in (base, work, unmet):
            os.chown(p, NOBODY, NOBODY)
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
            "import json, sys; from tests.sandbox.scratch import scratch_run; "
            f"json.dump(scratch_run({os.fspath(work)!r}, {backend!r}, {os.fspath(unmet)!r}), sys.stdout)",
            base,
            paths,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        check(json.loads(r.stdout))
    finally:
        shutil.rmtree(base, ignore_errors=True)
