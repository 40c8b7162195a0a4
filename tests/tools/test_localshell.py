"""LocalShell runs real bash in the project root and cleans up after itself."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trio

from speculate.fs import LocalShell


def test_runs_in_root_and_captures_both_streams(project: Path) -> None:
    res = trio.run(lambda: LocalShell(project).run("pwd; echo err >&2; exit 3", timeout=10))
    assert res.stdout.strip() == str(project)
    assert res.stderr.strip() == "err"
    assert res.exit_code == 3 and not res.timed_out


def test_stdin_is_closed(project: Path) -> None:
    res = trio.run(lambda: LocalShell(project).run("cat; echo done", timeout=10))
    assert res.stdout == "done\n"


def test_timeout_kills_the_whole_process_group(project: Path) -> None:
    pidfile = project / "child.pid"
    cmd = f"sleep 30 & echo $! > {pidfile}; echo started; wait"
    t0 = time.monotonic()
    res = trio.run(lambda: LocalShell(project).run(cmd, timeout=0.5))
    assert time.monotonic() - t0 < 5
    assert res.timed_out and res.stdout == "started\n"  # output up to the timeout is kept
    assert res.exit_code == 128 + 9
    _assert_dead(int(pidfile.read_text()))


def test_background_child_does_not_outlive_command(project: Path) -> None:
    pidfile = project / "bg.pid"
    t0 = time.monotonic()
    res = trio.run(lambda: LocalShell(project).run(f"sleep 30 & echo $! > {pidfile}; echo ok", timeout=20))
    assert time.monotonic() - t0 < 5
    assert res.stdout == "ok\n" and res.exit_code == 0 and not res.timed_out
    _assert_dead(int(pidfile.read_text()))


def test_cancellation_kills_the_command(project: Path) -> None:
    pidfile = project / "c.pid"

    async def main() -> None:
        with trio.move_on_after(0.5):
            await LocalShell(project).run(f"echo $$ > {pidfile}; sleep 30", timeout=60)

    trio.run(main)
    _assert_dead(int(pidfile.read_text()))


def test_rejects_non_positive_timeout(project: Path) -> None:
    with pytest.raises(ValueError, match="timeout"):
        trio.run(lambda: LocalShell(project).run("true", timeout=0))


def _assert_dead(pid: int) -> None:
    # Killed and reaped (or a zombie of init's already): /proc shows it gone or a zombie.
    for _ in range(50):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    raise AssertionError(f"process {pid} survived")
