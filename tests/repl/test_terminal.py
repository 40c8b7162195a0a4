"""The terminal between prompts (speculate.repl.terminal.enter_stays_enter), on a real pseudo-terminal: keys
typed while no prompt reads (a turn ending, a slash command) reach the next prompt as the keys they were.
The next prompt switches the terminal to raw mode as prompt-toolkit does (TCSANOW, no flush) and reads."""

from __future__ import annotations

import os
import pty
import select
import sys
import termios
from collections.abc import Iterator

import pytest

from speculate.repl.terminal import enter_stays_enter


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, int]]:
    master, slave = pty.openpty()
    stdin = os.fdopen(slave, "r", closefd=False)
    monkeypatch.setattr(sys, "stdin", stdin)
    try:
        yield master, slave
    finally:
        stdin.close()
        os.close(master)
        os.close(slave)


def typed_then_read_raw(master: int, slave: int, keys: bytes) -> bytes:
    os.write(master, keys)
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)
    attrs[6][termios.VMIN], attrs[6][termios.VTIME] = 1, 0
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    ready, _, _ = select.select([slave], [], [], 2)
    return os.read(slave, 64) if ready else b""


def test_ctrl_d_and_enter_typed_between_prompts_reach_the_next_prompt(terminal: tuple[int, int]) -> None:
    master, slave = terminal
    with enter_stays_enter():
        # Cooked mode took a Ctrl-D after other keys as end-of-file: the next prompt read a NUL instead.
        assert typed_then_read_raw(master, slave, b"ab\x04") == b"ab\x04"


def test_the_terminal_is_restored_on_exit(terminal: tuple[int, int]) -> None:
    _, slave = terminal
    before = termios.tcgetattr(slave)
    with enter_stays_enter():
        inside = termios.tcgetattr(slave)
        assert not inside[0] & termios.ICRNL and inside[6][termios.VEOF] != before[6][termios.VEOF]
    assert termios.tcgetattr(slave) == before
