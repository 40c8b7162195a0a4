"""A fork's commands share one mounted view (overlayfs.sandbox.keep_view): one mount for all of them, what
the pure view writes between them seen by the next, a server that dies replaced, the mount gone with the
overlay. And the two ways of entering the sandbox (compiled stages, Python stages) give the same sandbox."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from overlayfs import stage as stages
from overlayfs.bounded import LayerBound
from overlayfs.conflicts import find_conflicts
from overlayfs.mount import choose_backend
from overlayfs.sandbox import BACKEND_FAILED_EXIT, CancelToken, keep_view, run_sandboxed
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, kill_server_mid_command, require

MOUNTABLE = backend_params("fuse", "fuse-overlayfs", "kernel")


@pytest.fixture
def kept(project: Path) -> Iterator[Overlay]:
    ov = Overlay(project, bound=LayerBound())
    yield ov
    ov.discard()


def _run(ov: Overlay, backend: str, cmd: str) -> str:
    r = run_sandboxed(ov, cmd, timeout=60, backend=backend)
    assert r.exit_code == 0 and r.backend_failed is None, (cmd, r.stdout, r.stderr)
    return r.stdout


def _server(ov: Overlay) -> int | None:
    m = ov.sandbox._mount if ov.sandbox is not None else None
    return m._proc.pid if m is not None and m._proc is not None else None


@pytest.mark.parametrize("backend", MOUNTABLE)
def test_the_view_s_writes_between_commands_are_seen_by_the_next(
    backend: str, kept: Overlay, project: Path
) -> None:
    """Every kind of write the file tools make, each right after a command that cached what it changes:
    contents read (pages), names looked up and missing (negative entries), directories listed."""
    require(backend)
    keep_view(kept, backend)
    first = _run(
        kept,
        backend,
        "cat README.md; test -e new.txt || echo absent; ls src/shop; cat Makefile >/dev/null;"
        " echo one > mine.txt; cat mine.txt",
    )
    assert "absent" in first and "cart.py" in first
    server = _server(kept)
    kept.write_text("README.md", "# changed by the view\n")  # a lower file the command had read
    kept.write_text("new.txt", "made by the view\n")  # a name the command looked up and missed
    kept.write_text("mine.txt", "two\n")  # an upper file the command wrote: the same size as before
    kept.unlink("Makefile")
    kept.rmtree("src/shop")  # a lower directory the command listed, replaced: nothing of it shows through
    kept.mkdir("src/shop")
    kept.write_text("src/shop/only.py", "x = 1\n")
    kept.rename("tests", "checks")
    out = _run(kept, backend, "cat README.md new.txt mine.txt; ls; echo --; ls src/shop; ls checks | head -1")
    assert "# changed by the view" in out and "made by the view" in out and "two" in out
    listing, shop = out.split("--\n")
    assert (
        "Makefile" not in listing.split() and "tests" not in listing.split() and "checks" in listing.split()
    )
    assert shop.split()[0] == "only.py" and "cart.py" not in shop
    if backend == "fuse":
        assert _server(kept) == server  # told, not replaced
    # And the other way round: what the command wrote, the view reads, though it had looked those up.
    assert kept.exists("CHANGELOG.md") and "# edited" not in kept.read_text("pyproject.toml")
    _run(
        kept,
        backend,
        "echo three > mine.txt; mkdir -p made/deep && echo x > made/deep/f; rm CHANGELOG.md;"
        " echo '# edited' >> pyproject.toml",
    )
    assert kept.read_text("mine.txt") == "three\n" and kept.read_text("made/deep/f") == "x\n"
    assert not kept.exists("CHANGELOG.md") and "# edited" in kept.read_text("pyproject.toml")


@pytest.mark.fuse
def test_commands_share_one_fuse_server_until_the_overlay_is_discarded(project: Path) -> None:
    require("fuse")
    ov = Overlay(project, bound=LayerBound())
    keep_view(ov, "fuse")
    try:
        _run(ov, "fuse", "true")
        pid = _server(ov)
        assert pid is not None
        for _ in range(3):
            _run(ov, "fuse", "ls >/dev/null")
        assert _server(ov) == pid
    finally:
        ov.discard()
    assert (
        ov.sandbox is None and not os.path.exists(f"/proc/{pid}/cmdline")
    ) or b"overlayfs.fuse" not in Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.fuse
def test_a_kept_fuse_server_that_dies_fails_its_command_and_the_next_gets_a_fresh_one(kept: Overlay) -> None:
    require("fuse")
    keep_view(kept, "fuse")
    _run(kept, "fuse", "echo before > f.txt")
    pid = _server(kept)
    assert pid is not None
    r = kill_server_mid_command(
        lambda cmd: run_sandboxed(kept, cmd, timeout=60, backend="fuse"),
        lambda: os.kill(pid, signal.SIGKILL),
        after="cat f.txt; echo still-here",
    )
    assert r.backend_failed is not None and r.exit_code == BACKEND_FAILED_EXIT
    assert _run(kept, "fuse", "cat f.txt") == "before\n"  # a new server over the same layer
    assert _server(kept) not in (None, pid)
    # Killed between commands: noticed before the next one, which runs on a fresh mount.
    m = kept.sandbox._mount
    m._proc.kill()
    m._proc.wait()
    assert _run(kept, "fuse", "cat f.txt") == "before\n"


@pytest.mark.parametrize("backend", backend_params("fuse", "fuse-overlayfs"))
def test_a_promotion_leaves_no_stale_mount(backend: str, kept: Overlay, project: Path) -> None:
    require(backend)
    keep_view(kept, backend)
    _run(kept, backend, "echo v1 > a.txt; cat README.md >/dev/null")
    assert kept.promote(["a.txt"]).ok
    (project / "README.md").write_text("# edited by the user\n")
    _run(kept, backend, "echo v2 > b.txt")
    out = _run(kept, backend, "cat a.txt README.md b.txt")
    assert out == "v1\n# edited by the user\nv2\n"


@pytest.mark.privileged
@pytest.mark.parametrize("compiled", [True, False], ids=["stage.c", "python-stages"])
def test_both_stage_programs_build_the_same_sandbox(
    compiled: bool, kept: Overlay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rlimits, no capabilities, no_new_privs, Landlock (a write outside the writable trees is refused even
    where the file's mode allows it: /proc/self/comm) and the mounted view, whichever stage runs."""
    require("kernel")
    if compiled and stages.stage_program() is None:
        pytest.skip("no C compiler here: only the Python stages run")
    if not compiled:
        monkeypatch.setattr(stages, "stage_program", lambda: None)
    r = run_sandboxed(
        kept,
        "ulimit -u; ulimit -n; ulimit -f; ulimit -c; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status;"
        " (echo spec > /proc/self/comm) 2>/dev/null && echo comm-written || echo comm-refused;"
        " echo in-view > v.txt && cat v.txt",
        timeout=60,
        backend="kernel",
    )
    assert r.exit_code == 0, r.stderr
    assert r.enforced is not None and r.enforced["stages"] == ("compiled (stage.c)" if compiled else "Python")
    lines = r.stdout.split()
    assert lines[:4] == ["512", "4096", str(LayerBound().bytes // 1024), "0"]
    assert "0000000000000000" in r.stdout and "NoNewPrivs:\t1" in r.stdout
    assert ("comm-refused" in r.stdout) == (r.enforced["landlock"] != "ABI 0")
    assert "in-view" in r.stdout and kept.read_text("v.txt") == "in-view\n"


@pytest.mark.fuse
def test_a_view_discarded_while_it_is_being_made_leaves_nothing(project: Path) -> None:
    """keep_view starts mounting at once, in a thread; an abort right after must not wait for it, and the
    thread unmounts what it made (the leak check after each test looks for mounts and servers)."""
    require("fuse")
    ov = Overlay(project, bound=LayerBound())
    keep_view(ov, "fuse")
    preparing = [t for t in threading.enumerate() if t.name == "sandbox-view-prepare"]
    ov.discard()
    assert ov.sandbox is None
    for t in preparing:
        t.join(30)
    assert not any(t.is_alive() for t in preparing)


@pytest.mark.fuse
def test_the_first_command_finds_the_view_made(kept: Overlay) -> None:
    require("fuse")
    keep_view(kept, "fuse")
    for t in [t for t in threading.enumerate() if t.name == "sandbox-view-prepare"]:
        t.join(30)
    made = _server(kept)
    assert made is not None  # mounted before any command asked
    _run(kept, "fuse", "true")
    assert _server(kept) == made


def test_auto_keeps_the_view_its_commands_run_on(kept: Overlay) -> None:
    """A shell given "auto" (as run_in_overlay takes it) keeps the view of the backend its commands pick."""
    if choose_backend("auto") == "pure":
        pytest.skip("no mountable backend here")
    held = keep_view(kept, "auto")
    r = run_sandboxed(kept, "echo one > a.txt", timeout=60, backend="auto")
    assert r.exit_code == 0, r.stderr
    assert held.backend == r.backend and kept.sandbox is held and not held.closed


@pytest.mark.parametrize("backend", MOUNTABLE)
def test_what_a_running_command_wrote_is_checked_against_its_bases(
    backend: str, kept: Overlay, project: Path
) -> None:
    """An acceptance checks for conflicts while the fork's last command may still be writing (as a test run
    writes __pycache__): what it wrote so far has its bases, so only the user's own edit is a conflict."""
    require(backend)
    (project / "src/shop/__pycache__").mkdir()
    (project / "src/shop/__pycache__/cart.pyc").write_bytes(b"old")
    keep_view(kept, backend)
    token = CancelToken()
    done: list[object] = []
    cmd = (
        "echo mine > README.md; echo new > new.txt; echo fresh > src/shop/__pycache__/cart.pyc; "
        "touch written; sleep 60"
    )
    runner = threading.Thread(
        target=lambda: done.append(run_sandboxed(kept, cmd, timeout=90, backend=backend, cancel=token))
    )
    runner.start()
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(f"{kept.upper}/written") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.exists(f"{kept.upper}/written") and runner.is_alive()
        kept.sandbox.record_so_far()
        changed = {c.path for c in kept.changes()}
        assert {"README.md", "new.txt", "src/shop/__pycache__/cart.pyc"} <= changed
        bases = kept.bases()
        conflicts, _ = find_conflicts(kept.lower, changed | set(bases), bases, kept.reads())
        assert conflicts == []
        (project / "src/shop/__pycache__/cart.pyc").write_bytes(b"the user's")
        conflicts, _ = find_conflicts(kept.lower, changed | set(bases), bases, kept.reads())
        assert [c.path for c in conflicts] == ["src/shop/__pycache__/cart.pyc"]
    finally:
        token.cancel()
        runner.join(60)
    assert done and not runner.is_alive()
