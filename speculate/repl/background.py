"""What runs beside the REPL's loop: the key watcher while a turn streams (Esc interrupts it, Ctrl-O expands
the last result), the prediction pushed to the front end once it exists (the engine's, else the demo's
script), and Ctrl-C as SIGINT. :class:`~speculate.repl.controller.Repl` is one of these."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import trio

from speculate.session import Session


class Background:
    """The tasks beside the loop; :class:`~speculate.repl.controller.Repl` sets these attributes."""

    fe: Any
    s: Session | None
    fallback: Callable[[], str | None]
    scripted_offered: int
    _nursery: trio.Nursery | None
    _turn_scope: trio.CancelScope | None
    _predict_scope: trio.CancelScope | None
    _keys_scope: trio.CancelScope | None
    _keys_stopped: trio.Event
    show_last: Callable[[], None]  # SessionOutput's (an annotation only: nothing here shadows it)

    # -- keys while a turn runs ---------------------------------------------------------------------------
    def _start_keys(self) -> None:
        """Watch the terminal while the turn runs (Esc interrupts it), if the front end can."""
        watch = getattr(self.fe, "keys_during_turn", None)
        if watch is None or self._nursery is None or self._turn_scope is None:
            return
        scope = self._keys_scope = trio.CancelScope()
        stopped = self._keys_stopped = trio.Event()

        async def run() -> None:
            try:
                with scope:
                    await watch(self._escape, self.show_last)
            finally:
                stopped.set()

        self._nursery.start_soon(run)

    async def _stop_keys(self) -> None:
        """Stop watching and wait until the terminal's settings are back (a prompt is about to start)."""
        if self._keys_scope is not None:
            self._keys_scope.cancel()
            self._keys_scope = None
            await self._keys_stopped.wait()

    def _escape(self) -> None:
        if self._turn_scope is not None:
            self._turn_scope.cancel()

    # -- predictions --------------------------------------------------------------------------------------
    def _predict_next(self) -> None:
        """Push the next prediction once it exists: the engine's, else the fallback (demo script)."""
        assert self._nursery is not None
        self._cancel_prediction()
        scope = self._predict_scope = trio.CancelScope()
        self._nursery.start_soon(self._predict, scope)

    async def _predict(self, scope: trio.CancelScope) -> None:
        assert self.s is not None and self.fe is not None
        with scope:
            text = await self.s.wait_suggestion() if self.s.cfg.speculate else None
            if not text and (text := self.fallback()):
                self.scripted_offered += 1
            self.fe.push(text)

    async def wait_prediction(self) -> str | None:
        assert self.s is not None
        text = await self.s.wait_suggestion() if self.s.cfg.speculate else None
        return text or self.fallback()

    def _cancel_prediction(self) -> None:
        if self._predict_scope is not None:
            self._predict_scope.cancel()
            self._predict_scope = None

    async def _watch_sigint(self) -> None:
        try:
            receiver = trio.open_signal_receiver(signal.SIGINT)
        except (RuntimeError, ValueError):
            return  # not the main thread (embedded use): Ctrl-C stays Python's
        with receiver as sigs:
            async for _ in sigs:
                if self._turn_scope is not None:
                    self._turn_scope.cancel()
                elif self.fe is not None:
                    self.fe.abort()  # line mode waiting for input: Ctrl-C leaves
