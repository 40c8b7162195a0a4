"""The terminal around the prompt: Enter kept as Enter between prompts (ICRNL off), the tty's fd when the
prompt reads a real terminal, and the keys typed ahead during a cancelled turn that must not send the line."""

from __future__ import annotations

import os
import sys
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.keys import Keys


def unsent(presses: list[KeyPress]) -> list[KeyPress]:
    """Keys typed ahead during a cancelled turn, minus what would send them: trailing Enters dropped, the
    others turned into newlines (Ctrl-J), so the text waits in the prompt for a fresh Enter."""
    while presses and presses[-1].key == Keys.ControlM:
        presses.pop()
    return [KeyPress(Keys.ControlJ, "\n") if p.key == Keys.ControlM else p for p in presses]


@contextmanager
def enter_stays_enter() -> Iterator[None]:
    """While the REPL runs, the terminal does not turn Enter (``\r``) into ``\n`` (ICRNL off).

    Between prompts (a slash command, ``/accept`` waiting for its prediction, the start of a turn) the
    terminal is in cooked mode, where an Enter typed ahead would become ``\n``: Ctrl-J to the next prompt,
    which inserts a newline instead of sending the line. Without ICRNL the ``\r`` waits in the line buffer
    and reaches the next prompt (or the turn's key watcher) as Enter. Likewise Ctrl-D: in cooked mode the
    line discipline takes it as end-of-file and the next prompt (raw, TCSANOW) reads a NUL instead, so a
    Ctrl-D pressed as a turn ends was lost and the REPL stayed; with VEOF disabled it waits as ``\x04`` and
    the prompt takes it as Ctrl-D. Restored on exit."""
    fd = tty_fd(None)
    if fd is None:
        yield
        return
    saved = termios.tcgetattr(fd)
    kept = termios.tcgetattr(fd)
    kept[0] &= ~termios.ICRNL
    kept[6][termios.VEOF] = _disabled(fd)
    termios.tcsetattr(fd, termios.TCSANOW, kept)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def _disabled(fd: int) -> bytes:
    """The value that disables a special character on this terminal (``_POSIX_VDISABLE``: NUL on Linux)."""
    try:
        off = os.fpathconf(fd, "PC_VDISABLE")
    except (OSError, ValueError):
        off = 0
    return bytes([off if 0 <= off < 256 else 0])


def tty_fd(inp: Any) -> int | None:
    """The terminal's fd when the prompt reads a real terminal (not a pipe input in tests)."""
    if inp is not None:
        return None
    try:
        fd = sys.stdin.fileno()
    except (OSError, ValueError):
        return None
    return fd if os.isatty(fd) else None
