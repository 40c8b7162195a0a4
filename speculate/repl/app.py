"""The prompt-toolkit front end: an input line with the predicted prompt as ghost text, Tab/Right to take
it, an empty Enter that does nothing, and a bottom toolbar.

prompt-toolkit runs on asyncio, the session on trio: :meth:`PromptFrontend.read` runs ``prompt()`` in a
worker thread, and predictions are pushed into the running prompt with ``loop.call_soon_threadsafe`` (the
buffer asks its AutoSuggest only when text is inserted, so a prediction arriving at an empty line must be
pushed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import trio
from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.auto_suggest import AutoSuggest, Suggestion
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import AnyFormattedText
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from speculate.repl.answers import BadAnswer, choose


def rest_of(prediction: str | None, text: str) -> str | None:
    """What is still to type of ``prediction`` after ``text``; None when ``text`` is not a prefix of it."""
    if prediction is None or not prediction.startswith(text) or len(text) == len(prediction):
        return None
    return prediction[len(text):]


class PredictionSuggest(AutoSuggest):
    """Keeps the rest of the prediction visible while the typed text is a prefix of it."""

    def __init__(self, prediction: Callable[[], str | None]) -> None:
        self.prediction = prediction

    def get_suggestion(self, buffer: Buffer, document: Document) -> Suggestion | None:
        rest = rest_of(self.prediction(), document.text)
        return Suggestion(rest) if rest and document.is_cursor_at_the_end else None


class PromptFrontend:
    """The input side of the REPL on a terminal. ``on_diverge`` is called (in the prompt's thread) on the
    first keystroke that makes the line stop being a prefix of the prediction (slash commands excepted:
    the prediction comes back at the next prompt)."""

    color = True

    def __init__(self, *, toolbar: Callable[[], AnyFormattedText], on_diverge: Callable[[], None],
                 history: History | None = None, input: Any = None, output: Any = None,
                 message: AnyFormattedText = "› ") -> None:
        self._lock = threading.Lock()
        self._prediction: str | None = None
        self.on_diverge = on_diverge
        self.message = message
        self.session: PromptSession[str] = PromptSession(
            history=history or InMemoryHistory(), auto_suggest=PredictionSuggest(self.prediction),
            key_bindings=self._bindings(), bottom_toolbar=toolbar, refresh_interval=0.5,
            input=input, output=output, enable_history_search=False)
        self._io = {"input": input, "output": output}
        self._asking: PromptSession[str] | None = None  # the permission question on screen, if any
        self._closed = False  # abort() was called: no more prompts
        buf = self.session.default_buffer
        buf.on_text_changed += self._text_changed
        buf.on_text_insert += self._text_inserted

    # -- the prediction (any thread) --------------------------------------------------------------------
    def prediction(self) -> str | None:
        with self._lock:
            return self._prediction

    def push(self, prediction: str | None) -> None:
        """Show ``prediction`` as ghost text now if a prompt is running, else when the next one starts."""
        with self._lock:
            self._prediction = prediction
        self._call_in_prompt(self._apply)

    def invalidate(self) -> None:
        self._call_in_prompt(self.session.app.invalidate)

    def abort(self) -> None:
        """End the running prompt (or question) as if Ctrl-D was pressed, and any later one at once
        (shutting down from the trio side)."""
        self._closed = True
        for session in (self.session, self._asking):
            if session is None:
                continue
            app = session.app
            if app.loop is not None:
                try:
                    app.loop.call_soon_threadsafe(
                        lambda app=app: app.exit(exception=EOFError()) if app.is_running and not app.is_done
                        else None)
                except RuntimeError:
                    pass  # its loop just closed

    def _call_in_prompt(self, fn: Callable[[], object]) -> None:
        loop = self.session.app.loop
        if loop is None:
            return  # no prompt running: the next prompt's pre_run applies the state
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:
            pass  # the prompt's loop just closed; same as above

    # -- in the prompt's thread ---------------------------------------------------------------------------
    def _apply(self) -> None:
        buf = self.session.default_buffer
        rest = rest_of(self.prediction(), buf.text)
        buf.suggestion = Suggestion(rest) if rest and buf.document.is_cursor_at_the_end else None
        self.session.app.invalidate()

    def _text_changed(self, buf: Buffer) -> None:
        # Any change clears buffer.suggestion; put it back (e.g. after Backspace) while still a prefix.
        rest = rest_of(self.prediction(), buf.text)
        if rest and buf.document.is_cursor_at_the_end:
            buf.suggestion = Suggestion(rest)

    def _text_inserted(self, buf: Buffer) -> None:
        with self._lock:
            p = self._prediction
            diverged = p is not None and not p.startswith(buf.text)
            if diverged and buf.text.startswith("/"):
                return  # a slash command (/diff, /stats) looks at the speculation; it must not abort it
            if diverged:
                self._prediction = None
        if diverged:
            buf.suggestion = None
            self.on_diverge()

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @Condition
        def ghost_at_end() -> bool:
            buf = self.session.default_buffer
            return bool(buf.suggestion and buf.suggestion.text) and buf.document.is_cursor_at_the_end

        @Condition
        def line_empty() -> bool:
            return not self.session.default_buffer.text.strip()

        @kb.add("tab", filter=ghost_at_end)
        def _accept(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            assert buf.suggestion is not None
            buf.insert_text(buf.suggestion.text)

        @kb.add("enter", filter=line_empty)
        def _empty_enter(event: KeyPressEvent) -> None:
            """An empty Enter neither submits nor takes the ghost text: taking it is Tab's job."""

        return kb

    # -- trio side ----------------------------------------------------------------------------------------
    def prompt_blocking(self) -> str:
        """One line (blocking; run in a worker thread). KeyboardInterrupt on Ctrl-C, EOFError on Ctrl-D."""
        if self._closed:
            raise EOFError
        return self.session.prompt(self.message, pre_run=self._pre_run)

    def _pre_run(self) -> None:
        if self._closed:  # aborted between the check above and the prompt starting
            self.session.app.exit(exception=EOFError())
            return
        self._apply()

    async def read(self) -> str:
        return await trio.to_thread.run_sync(self.prompt_blocking)

    async def ask(self, question: str, choices: Sequence[str]) -> str:
        """A one-off question (permission prompt) answered by one of ``choices`` or a unique prefix."""
        ps: PromptSession[str] = PromptSession(**self._io)

        def blocking() -> str:
            while True:
                if self._closed:
                    raise EOFError
                raw = ps.prompt(f"{question} [{'/'.join(choices)}] ")
                try:
                    return choose(raw, choices)
                except BadAnswer as e:
                    print_formatted_text(f"  {e}", output=self._io["output"])

        self._asking = ps
        try:
            return await trio.to_thread.run_sync(blocking)
        finally:
            self._asking = None


def repl_main(argv: Sequence[str] | None = None) -> int:
    """``speculate repl [DIR] [--model sim|anthropic] ...``: see :mod:`speculate.repl.main`."""
    from speculate.repl.main import run_main

    return run_main(argv)
