"""The REPL's writing side: every line it prints, and the live line under a running turn.

Everything goes through :meth:`Output._write`, which renders it with :func:`speculate.term.render`: model
text, tool and hook output, file names and diffs are untrusted, so their control characters are shown,
never interpreted; our colours come from the fragments' styles (:meth:`Output._c`), added after. The only
bytes written otherwise are this module's own constants, which draw and erase the live line
(:data:`ERASE_LINE`).

The live line (:mod:`speculate.repl.turnline`) is drawn only on a terminal (a front end with colours),
only while the cursor is at the start of a line (between tool lines, before the first token), and is
erased before anything else is written, so output never mixes with it. Streaming text mid-line hides it
until the line ends: the text itself shows progress then.

Model text is wrapped at word boundaries to the terminal's width as it streams (:meth:`Output._stream`): a
word is written once it has ended, on the next line if it would cross the edge, so a narrow terminal
never breaks a word in two (a word wider than the terminal is left to the terminal).
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

import trio
from prompt_toolkit.utils import get_cwidth

from speculate.repl.render import columns
from speculate.repl.turnline import TurnLine
from speculate.term import Fragments, render, visible

ERASE_LINE = "\r\x1b[K"  # carriage return, erase to the end of the line: our own constant, never input
TICK_S = 0.1
_TOKENS = re.compile(r"(\s+)")


class Output:
    """Where the REPL writes (``out``) and the live line's state; the front end says whether it is a terminal."""

    fe: Any

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._at_line_start = True
        self.turn_line: TurnLine | None = None  # set while a turn runs
        self._line_drawn = False  # the live line is on screen (the cursor at its end)
        self._line_paused = False  # a question is on screen: no live line under it
        self._col = 0  # columns written on the current line
        self._word = ""  # streamed model text held back: a word not ended yet

    # -- lines ------------------------------------------------------------------------------------------
    def _c(self, code: str, text: str) -> list[tuple[str, str]]:
        """``text`` in colour ``code`` (SGR parameters), when the front end shows colours."""
        return [(code, text)]

    def _colour(self) -> bool:
        return self.fe is not None and bool(self.fe.color)

    def _write(self, text: Fragments) -> None:
        self._flush_word()
        self._emit(text)

    def _emit(self, text: Fragments) -> None:
        shown = render(text, color=self._colour())
        if shown:
            self._erase_turn_line()
            self.out.write(shown)
            self.out.flush()
            self._at_line_start = shown.endswith("\n")
            plain = render(text, color=False)
            last = plain.rsplit("\n", 1)
            self._col = get_cwidth(last[-1]) + (self._col if len(last) == 1 else 0)

    def _stream(self, text: str) -> None:
        """Model text as it streams, wrapped at word boundaries on a terminal (written as is elsewhere)."""
        if not self._colour():
            self._emit(text)
            return
        width = max(columns() - 1, 20)
        parts = _TOKENS.split(self._word + visible(text))
        self._word = parts.pop() if parts and parts[-1] else ""  # the last word may go on in the next delta
        out: list[str] = []
        col = self._col
        for part in parts:
            if not part:
                continue
            if part.isspace():
                out.append(part)
                col = get_cwidth(part.rsplit("\n", 1)[-1]) + (col if "\n" not in part else 0)
                continue
            w = get_cwidth(part)
            if col > 0 and col + w > width:
                while out and out[-1].isspace() and "\n" not in out[-1]:
                    out.pop()  # the space before the word would end the line
                out.append("\n")
                col = 0
            out.append(part)
            col += w
        if out:
            self._emit("".join(out))

    def _flush_word(self) -> None:
        """Write the held-back word (the response ended, or something else is written)."""
        if self._word:
            word, self._word = self._word, ""
            if self._col > 0 and self._col + get_cwidth(word) > max(columns() - 1, 20):
                self._emit("\n")
            self._emit(word)

    def _newline(self) -> None:
        self._flush_word()
        if not self._at_line_start:
            self._write("\n")

    def _line(self, text: Fragments) -> None:
        self._newline()
        self._write(text)
        self._write("\n")

    def _lines(self, lines: list[list[tuple[str, str]]]) -> None:
        for ln in lines:
            self._line(ln)

    # -- the live line ------------------------------------------------------------------------------------
    def _erase_turn_line(self) -> None:
        if self._line_drawn:
            self.out.write(ERASE_LINE)
            self._line_drawn = False

    def _draw_turn_line(self) -> None:
        line = self.turn_line
        if line is None or not self._colour() or not self._at_line_start or self._line_paused:
            return
        shown = render(line.render(columns(), getattr(self.fe, "typeahead", "")), color=True)
        self.out.write(ERASE_LINE + shown)
        self.out.flush()
        self._line_drawn = True

    async def _turn_line_task(self, line: TurnLine) -> None:
        """Redraw the live line until cancelled (the turn is over); then erase it."""
        self.turn_line = line
        try:
            while True:
                self._draw_turn_line()
                await trio.sleep(TICK_S)
        finally:
            self.turn_line = None
            self._erase_turn_line()
            self.out.flush()

    def _pause_turn_line(self, paused: bool) -> None:
        """A question takes the terminal: no live line under it (and none left over it)."""
        self._line_paused = paused
        if paused:
            self._erase_turn_line()
            self.out.flush()
