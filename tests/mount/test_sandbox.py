"""Speculative Bash in the sandbox: real tools in the merged view, contained, bounded; reads recorded."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from overlayfs import backends, layer
from overlayfs.mount import MountError, mounted
from overlayfs.sandbox import run_in_overlay, run_sandboxed
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require, require_host_mount, tree_digest

MOUNTABLE = backend_params("fuse", "kernel", "fuse-overlayfs")
PY = sys.executable


@pytest.mark.slow
@pytest.mark.parametrize("backend", MOUNTABLE)
def test_build_and_test_tools_run_in_the_view(
    backend: str, project: Path, overlay: Overlay, tmp_path: Path
) -> None:
    require(backend)
    before = tree_digest(project)
    native = tmp_path / "native"
    shutil.copytree(project, native, symlinks=True)
    native_tests = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=native, capture_output=True, text=True
    )

    script = f"""set -e
pwd
sed -i '1s/^/# edited\\n/' src/shop/utils.py
git status --porcelain --untracked-files=no
git diff --stat | tail -1
grep -rl 'def ' src | sort | tr '\\n' ' '; echo
make -s lint PYTHON={PY}
make -s test PYTHON={PY} 2>&1 | tail -1
"""
    r = run_sandboxed(overlay, script, timeout=120, backend=backend)
    assert r.exit_code == 0, r.stderr
    assert r.enforced is not None and r.enforced["view"] == backends.get(backend).enforces
    lines = r.stdout.splitlines()
    assert lines[0] == str(project)  # the view sits at the project's own path
    assert " M src/shop/utils.py" in lines
    assert "1 file changed" in r.stdout
    native_grep = subprocess.run(
        "grep -rl 'def ' src | sort | tr '\\n' ' '", shell=True, cwd=project, capture_output=True, text=True
    ).stdout
    assert native_grep.strip() in [line.strip() for line in lines]
    # Same test results inside the view as natively (the edit only added a comment line).
    assert native_tests.stdout.strip().splitlines()[-1].split(" in ")[0] in lines[-1]
    assert tree_digest(project) == before
    got = {(c.path, c.kind) for c in Overlay(project, upper=overlay.upper).changes()}
    assert ("src/shop/utils.py", "modified") in got
    assert (project / "src" / "shop" / "utils.py").read_text() == (
        native / "src" / "shop" / "utils.py"
    ).read_text()


@pytest.mark.parametrize("backend", backend_params("fuse", "fuse-overlayfs", "kernel"))
def test_mounted_root_for_plain_subprocess(backend: str, project: Path, overlay: Overlay) -> None:
    require_host_mount(backend)
    with mounted(overlay, backend) as root:
        subprocess.run(
            ["sh", "-c", "echo hi > new.txt && sed -i s/def/DEF/ src/shop/pager.py"], cwd=root, check=True
        )
        assert (root / "new.txt").read_text() == "hi\n"
    assert not (project / "new.txt").exists()
    assert "DEF" not in (project / "src/shop/pager.py").read_text()
    got = {(c.path, c.kind) for c in Overlay(project, upper=overlay.upper).changes()}
    assert {("new.txt", "added"), ("src/shop/pager.py", "modified")} <= got


@pytest.mark.fuse
def test_fuse_records_reads_and_bases(project: Path, overlay: Overlay) -> None:
    require("fuse")
    r = run_sandboxed(
        overlay,
        "cat src/shop/cart.py > /dev/null; echo x >> src/shop/utils.py; rm README.md; touch brand-new",
        timeout=60,
        backend="fuse",
    )
    assert r.exit_code == 0, r.stderr
    reads = layer.load_identities(overlay.metadir, layer.READS_FILE)
    bases = layer.load_identities(overlay.metadir, layer.BASES_FILE)
    assert reads["src/shop/cart.py"].matches(layer.Identity.of(project, "src/shop/cart.py"))
    assert bases["src/shop/utils.py"] == layer.Identity.of(project, "src/shop/utils.py")
    assert bases["README.md"].exists and not bases["brand-new"].exists
    assert "src/shop/utils.py" not in reads  # opened for writing: a base, not a read


@pytest.mark.fuse
def test_fuse_records_what_was_read_even_without_a_read_request(project: Path, overlay: Overlay) -> None:
    """The kernel reads an empty file without asking the server (it knows the size) and opens files without
    asking (OPEN is answered ENOSYS): an empty file a command looked at is a read all the same; a file only
    listed is not."""
    require("fuse")
    (project / "empty.txt").write_bytes(b"")
    (project / "docs").mkdir()
    (project / "docs" / "listed.md").write_text("only listed\n")
    r = run_sandboxed(
        overlay, "cat empty.txt; head -c 5 src/shop/cart.py; ls docs", timeout=60, backend="fuse"
    )
    assert r.exit_code == 0, r.stderr
    reads = layer.load_identities(overlay.metadir, layer.READS_FILE)
    assert reads["empty.txt"].matches(layer.Identity.of(project, "empty.txt"))
    assert reads["src/shop/cart.py"].matches(layer.Identity.of(project, "src/shop/cart.py"))
    assert "docs/listed.md" not in reads


@pytest.mark.privileged
def test_kernel_session_records_bases_and_whole_tree_reads(project: Path, overlay: Overlay) -> None:
    require("kernel")
    r = run_sandboxed(overlay, "echo x >> src/shop/utils.py; rm README.md", timeout=60, backend="kernel")
    assert r.exit_code == 0, r.stderr
    bases = layer.load_identities(overlay.metadir, layer.BASES_FILE)
    reads = layer.load_identities(overlay.metadir, layer.READS_FILE)
    assert bases["src/shop/utils.py"].matches(layer.Identity.of(project, "src/shop/utils.py"))
    assert bases["README.md"].exists
    # Kernel overlayfs cannot say what was read: everything counts, as one record naming the watch of the
    # real tree (overlayfs.treewatch), or, where none can be made, every file of a snapshot.
    assert "src/shop/cart.py" in reads or [r.kind for r in reads.values()] == ["watch"]


@pytest.mark.privileged
def test_sandbox_contains_network_tmp_home_and_time(project: Path, overlay: Overlay, tmp_path: Path) -> None:
    backend = "kernel" if "kernel" in _avail() else "fuse"
    require(backend)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        probe = f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\""
        cut = run_sandboxed(overlay, probe, timeout=30, backend=backend)
        assert cut.exit_code != 0 and "Connection refused" in cut.stderr  # own loopback, host unreachable
        opened = run_in_overlay(overlay, ["sh", "-c", probe], timeout=30, backend=backend, network=True)
        assert opened.exit_code == 0, opened.stderr
    marker = f"speculate-sandbox-{os.getpid()}"
    r = run_sandboxed(
        overlay,
        f"ls -A /tmp | grep -c . ; echo hi > /tmp/{marker}; touch $HOME/{marker}; "
        "echo out; echo err >&2; exit 3",
        timeout=30,
        backend=backend,
    )
    assert r.exit_code == 3 and not r.timed_out
    assert "out" in r.stdout and "err" in r.stderr and "Read-only file system" in r.stderr
    assert not Path("/tmp", marker).exists() and not Path.home().joinpath(marker).exists()
    start = time.monotonic()
    slow = run_sandboxed(overlay, "sleep 31.4159 & sleep 31.4159", timeout=1, backend=backend)
    assert slow.timed_out and slow.exit_code == 124 and time.monotonic() - start < 10
    left = subprocess.run(["pgrep", "-f", "sleep 31.4159"], capture_output=True, text=True).stdout
    assert left == "", "a sandboxed process outlived its timeout"


def _avail() -> list[str]:
    from overlayfs.mount import available_backends

    return available_backends()


def test_bad_input_is_named(project: Path, overlay: Overlay, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="warp"):
        run_sandboxed(overlay, "true", timeout=5, backend="warp")
    with pytest.raises(ValueError, match="outside the project"):
        run_in_overlay(overlay, ["true"], timeout=5, cwd=tmp_path)
    with pytest.raises(ValueError, match="timeout"):
        run_sandboxed(overlay, "true", timeout=0)
    with pytest.raises(MountError, match="pure"), mounted(overlay, "pure"):
        pass


@pytest.mark.parametrize("backend", MOUNTABLE)
@pytest.mark.parametrize("command", ["rm -rf build", "rm -rf build && mkdir build && echo n > build/new"])
def test_deleting_a_lower_subtree_promotes_on_every_backend(
    backend: str, command: str, tmp_path: Path
) -> None:
    require(backend)
    root = tmp_path / "proj"
    (root / "build/lib/shop").mkdir(parents=True)
    (root / "build/lib/shop/a.py").write_text("x")
    (root / "keep").write_text("k")
    ov = Overlay(root)
    try:
        r = run_sandboxed(ov, command, timeout=30, backend=backend)
        assert r.exit_code == 0, r.stderr
        assert (root / "build/lib/shop/a.py").exists()  # untouched until promotion
        res = ov.promote()
        assert res.conflicts == []
        after = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        assert after == (["keep"] if command == "rm -rf build" else ["build", "build/new", "keep"])
    finally:
        ov.discard()
