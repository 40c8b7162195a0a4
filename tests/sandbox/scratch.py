"""A speculation's scratch space seen from its commands (importable by uid 65534 with Debian's python3: no
pytest here). See tests/sandbox/test_scratch_space.py."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

COMMANDS = (
    "echo scratch > /tmp/s && echo $TMPDIR",
    "cat /tmp/s",
    "echo y > /var/tmp/v; echo $?",
    "touch /run/r; echo $?",
)


def _unmet(module: str) -> Any:
    """speculate.speculation.unmet, loaded from its file (stdlib only; the speculate package is not
    importable where only the sandbox's code was copied)."""
    spec = importlib.util.spec_from_file_location("unmet", module)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["unmet"] = mod  # dataclasses looks the module up by name
    spec.loader.exec_module(mod)
    return mod


def scratch_run(work: str, backend: str, unmet_file: str) -> dict[str, Any]:
    from overlayfs import Overlay
    from overlayfs.sandbox import keep_view, run_sandboxed
    from overlayfs.sandbox.run import scratch_mountpoint

    project = Path(work) / "proj"
    project.mkdir()
    (project / "a.txt").write_text("alpha\n")
    outs = []
    ov = Overlay(project)
    keep_view(ov, backend)  # as a fork's shell does
    try:
        for command in COMMANDS:
            r = run_sandboxed(ov, command, timeout=60, backend=backend)
            outs.append([r.exit_code, r.stdout, r.stderr])
    finally:
        ov.discard()
    ov = Overlay(project)
    try:
        after = run_sandboxed(ov, "test -e /tmp/s; echo $?", timeout=60, backend=backend).stdout
    finally:
        ov.discard()
    with open("/proc/self/mountinfo") as f:
        mounted = any(line.split()[4] == scratch_mountpoint() for line in f)
    unmet = _unmet(unmet_file)
    own = Path(work) / "own"  # a directory this user may write on the host: the sandbox refuses it
    own.mkdir()
    judged = {
        "own": unmet.unmet_failure(
            f"touch: cannot touch '{own}/x': Read-only file system", 1, project=str(project), cwd=str(project)
        )
        is not None,
        "etc": unmet.unmet_failure(
            "touch: cannot touch '/etc/x': Read-only file system", 1, project=str(project), cwd=str(project)
        )
        is not None,
    }
    return {
        "outs": outs,
        "after": after,
        "mounted": mounted,
        "left": os.listdir(scratch_mountpoint()),
        "judged": judged,
        "root": os.geteuid() == 0,
    }
