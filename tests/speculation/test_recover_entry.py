"""Every entry point recovers an interrupted acceptance before it does anything else and says so in one
line: ``Session``, the REPL, ``speculate recover``; and an acceptance that fails is a normal turn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from overlayfs.state import project_state
from tests.overlay.crashkit import interrupt_promotion, temps

from .conftest import engine_session, make_project

REPO = Path(__file__).resolve().parents[2]


def interrupted(root: Path, state: str) -> None:
    """Leave a promotion of a.txt -> "gamma" killed with its journal in ``state`` (prepare or commit)."""
    interrupt_promotion(root, "a.txt", b"gamma\n", state)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "speculate.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_a_session_recovers_first(tmp_path: Path, state_dir: Path) -> None:
    root = make_project(tmp_path)
    interrupted(root, "commit")

    async def main() -> None:
        async with engine_session(root) as (s, _):
            assert s.recovery is not None and s.recovery.action == "rolled forward"
            assert (
                s.recovery.line()
                == f"recovered: rolled forward an interrupted acceptance of 1 change in {root}"
            )
            assert (root / "a.txt").read_text() == "gamma\n"

    trio.run(main)
    assert temps(root) == []
    assert not project_state(root).dir.exists()  # nothing pending at the end: its state dir is tidied away


def test_the_repl_says_what_it_recovered(tmp_path: Path, state_dir: Path) -> None:
    root = make_project(tmp_path)
    interrupted(root, "prepare")
    r = subprocess.run(
        [sys.executable, "-m", "speculate.cli", "repl", str(root), "--plain", "--no-spec"],
        input="",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), "SPECULATE_HISTORY": str(tmp_path / "h")},
    )
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("recovered: rolled back an interrupted acceptance of 1 change"), r.stdout
    assert r.stdout.count("recovered:") == 1
    assert (root / "a.txt").read_text() == "alpha\n" and temps(root) == []


def test_speculate_recover_command(tmp_path: Path, state_dir: Path) -> None:
    root = make_project(tmp_path)
    r = cli("recover", str(root))
    assert r.returncode == 0 and r.stdout == f"nothing pending for {root}\n"
    interrupted(root, "commit")
    r = cli("recover", str(root))
    assert r.returncode == 0 and r.stdout.startswith("recovered: rolled forward"), r.stdout + r.stderr
    assert (root / "a.txt").read_text() == "gamma\n" and temps(root) == []
    r = cli("recover", str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope" in r.stderr and "does not exist" in r.stderr
    r = cli("recover", str(root / "a.txt"))
    assert r.returncode == 2 and "a.txt" in r.stderr and "not a directory" in r.stderr


@pytest.mark.privileged
def test_a_failed_acceptance_is_rolled_back_and_runs_normally(tmp_path: Path, state_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=64", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        root = make_project(mnt)

        async def main() -> None:
            async with engine_session(root, overlay_backend="pure") as (s, _):
                await s.submit("look at a")
                await s.wait_speculation()
                (root.parent / "events.jsonl").touch()  # the session appends to it
                i = 0
                while os.statvfs(mnt).f_ffree:  # the disk is full now: no inode for the staged copy
                    (mnt / f"fill{i}").touch()
                    i += 1
                out = await s.submit("change alpha to gamma")
                assert "accepting it failed" in out.note and "a.txt" in out.note, out.note
                assert not out.accepted or out.result is not None
                rec = [r for r in s.events.records if r.kind == "speculation"][-1]
                assert rec.outcome == "error" and rec.time_saved_s == 0.0

        trio.run(main)
        assert temps(root) == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_an_acceptance_that_cannot_be_settled_is_one_line_and_stops_nothing(
    tmp_path: Path, state_dir: Path
) -> None:
    from overlayfs import recover_all
    from overlayfs.state import ensure, pending

    root = make_project(tmp_path)
    (tmp_path / "other").mkdir()
    other = make_project(tmp_path / "other")
    interrupted(other, "commit")
    ps = project_state(root)
    ensure(ps)
    ps.journal.write_bytes(b'{"version": 99}\n')  # a journal this code cannot read (another version's)
    r = subprocess.run(
        [sys.executable, "-m", "speculate.cli", "repl", str(root), "--plain", "--no-spec"],
        input="",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), "SPECULATE_HISTORY": str(tmp_path / "h")},
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr  # the REPL starts all the same
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"not recovered: the acceptance journal of {root} cannot be read"), r.stdout
    assert f"speculate recover --abandon {root}" in first
    recs = {rec.project: rec for rec in recover_all()}  # what `speculate bench` runs first
    assert not recs[root].ok and recs[other].ok and recs[other].action == "rolled forward"
    r = cli("recover", str(root))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    r = cli("recover", "--abandon", str(root))
    assert r.returncode == 0 and "kept as it is" in r.stdout, r.stdout + r.stderr
    assert not pending(ps) and (root / "a.txt").read_text() == "alpha\n"
