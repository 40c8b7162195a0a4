"""Line mode for when prompt-toolkit cannot take the terminal (piped stdin): one prompt per line,
predictions printed as they arrive, ``/accept`` (or a line holding just a Tab) sends the prediction. What it
writes is made :func:`speculate.term.visible` (a prediction is model text)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

import trio

from speculate.repl.answers import BadAnswer, choose
from speculate.term import visible

ACCEPT_LINES = ("\t", "/accept")


class PlainFrontend:
    color = False

    def __init__(self, *, stdin: TextIO | None = None, out: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.out = out or sys.stdout
        self._prediction: str | None = None
        self._scope: trio.CancelScope | None = None

    def push(self, prediction: str | None) -> None:
        if prediction is not None and prediction != self._prediction:
            self.out.write(f"[suggestion] {visible(prediction)}\n")
            self.out.flush()
        self._prediction = prediction

    def invalidate(self) -> None:
        pass  # no toolbar in line mode

    def abort(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def _readline(self) -> str:
        with trio.CancelScope() as scope:
            self._scope = scope
            try:
                line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
            finally:
                self._scope = None
        if scope.cancelled_caught or not line:
            raise EOFError
        return line

    async def read(self) -> str:
        line = await self._readline()
        return "/accept" if line.rstrip("\n") in ACCEPT_LINES else line.rstrip("\n")

    async def ask(self, question: str, choices: Sequence[str]) -> str:
        while True:
            self.out.write(f"{visible(question)} [{'/'.join(choices)}] ")
            self.out.flush()
            raw = (await self._readline()).strip()
            if not self.stdin.isatty():
                self.out.write(visible(raw) + "\n")  # piped answers are not echoed by a terminal
            try:
                return choose(raw, choices)
            except BadAnswer as e:
                self.out.write(f"  {visible(str(e))}\n")
