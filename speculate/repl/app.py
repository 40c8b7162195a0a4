"""The prompt-toolkit front end: an input line with the predicted prompt as ghost text, Tab/Right to take
it, an empty Enter that does nothing, and a bottom toolbar.

prompt-toolkit runs on asyncio, the session on trio: :meth:`PromptFrontend.read` runs ``prompt()`` in a
worker thread, and predictions are pushed into the running prompt with ``loop.call_soon_threadsafe`` (the
buffer asks its AutoSuggest only when text is inserted, so a prediction arriving at an empty line must be
pushed). The terminal's modes around the prompt, and keys typed ahead, are :mod:`speculate.repl.terminal`'s.
"""

from __future__ import annotations

import os
import termios
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import trio
from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.application import Application
from prompt_toolkit.auto_suggest import AutoSuggest, Suggestion
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import Completer
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition, has_completions, is_searching
from prompt_toolkit.formatted_text import AnyFormattedText
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.input.vt100_parser import Vt100Parser
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.keys import Keys

from speculate.repl.answers import BadAnswer, choose
from speculate.repl.inputs import Pastes
from speculate.repl.terminal import tty_fd, unsent
from speculate.term import visible


def rest_of(prediction: str | None, text: str) -> str | None:
    """What is still to type of ``prediction`` after ``text``; None when ``text`` is not a prefix of it."""
    if prediction is None or not prediction.startswith(text) or len(text) == len(prediction):
        return None
    return prediction[len(text) :]


class PredictionSuggest(AutoSuggest):
    """Keeps the rest of the prediction visible while the typed text is a prefix of it."""

    def __init__(self, prediction: Callable[[], str | None]) -> None:
        self.prediction = prediction

    def get_suggestion(self, buffer: Buffer, document: Document) -> Suggestion | None:
        rest = rest_of(self.prediction(), document.text)
        return Suggestion(rest) if rest and document.is_cursor_at_the_end else None


DivergePolicy = Literal["keep", "abort"]


class PromptFrontend:
    """The input side of the REPL on a terminal. ``on_diverge`` is called (in the prompt's thread) on the
    keystroke that makes the line stop being a prefix of the prediction (slash commands excepted). With the
    ``keep`` policy the ghost text is only hidden, and comes back when the line is edited back to a prefix
    (the speculation runs on until a different prompt is submitted); with ``abort`` the prediction is
    dropped. ``on_stop`` is Ctrl-C while ``running()`` (a speculation in flight): stop it, keep the line."""

    color = True

    def __init__(
        self,
        *,
        toolbar: Callable[[], AnyFormattedText],
        on_diverge: Callable[[], None],
        history: History | None = None,
        input: Any = None,
        output: Any = None,
        message: AnyFormattedText = "› ",
        policy: DivergePolicy = "keep",
        on_stop: Callable[[], None] | None = None,
        running: Callable[[], bool] | None = None,
        completer: Completer | None = None,
        on_mode_cycle: Callable[[], None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._prediction: str | None = None
        self._diverged = False  # the line is off the prediction (keep policy: ghost hidden, not dropped)
        self.on_diverge = on_diverge
        self.on_stop = on_stop or (lambda: None)
        self.running = running or (lambda: False)
        self.policy = policy
        self.message = message
        self.typeahead = ""  # keys typed while a turn ran; the next prompt gets them first
        self._held = False  # the turn they were typed in was cancelled: their Enter sends nothing
        self.on_mode_cycle = on_mode_cycle or (lambda: None)
        self.pastes = Pastes()  # large pastes of the line being typed, shown as placeholders
        self.session: PromptSession[str] = PromptSession(
            history=history or InMemoryHistory(),
            auto_suggest=PredictionSuggest(self.prediction),
            key_bindings=self._bindings(),
            bottom_toolbar=toolbar,
            refresh_interval=0.5,
            input=input,
            output=output,
            enable_history_search=False,
            completer=completer,
            complete_while_typing=completer is not None,
            reserve_space_for_menu=4 if completer is not None else 0,
        )
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
            self._diverged = False
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
                    app.loop.call_soon_threadsafe(_leave, app)
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
        # Any change clears buffer.suggestion; put it back (after Backspace, or editing back) while a prefix.
        rest = rest_of(self.prediction(), buf.text)
        if rest and buf.document.is_cursor_at_the_end:
            buf.suggestion = Suggestion(rest)
        with self._lock:
            p = self._prediction
            if p is not None and p.startswith(buf.text):
                self._diverged = False

    def _text_inserted(self, buf: Buffer) -> None:
        with self._lock:
            p = self._prediction
            diverged = p is not None and not p.startswith(buf.text) and not self._diverged
            if diverged and buf.text.startswith("/"):
                return  # a slash command (/diff, /stats) looks at the speculation; it must not abort it
            if diverged:
                self._diverged = True
                if self.policy == "abort":
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

        @kb.add("enter", filter=line_empty & ~is_searching)
        def _empty_enter(event: KeyPressEvent) -> None:
            """An empty Enter neither submits nor takes the ghost text: taking it is Tab's job."""

        # Multiline input: Esc-Enter or Ctrl-J insert a newline, and so does Enter after a trailing backslash.
        @kb.add("escape", "enter")
        @kb.add("c-j")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @Condition
        def trailing_backslash() -> bool:
            buf = self.session.default_buffer
            return buf.document.is_cursor_at_the_end and buf.text.endswith("\\")

        @kb.add("enter", filter=trailing_backslash & ~is_searching)
        def _continued(event: KeyPressEvent) -> None:
            event.current_buffer.delete_before_cursor(1)
            event.current_buffer.insert_text("\n")

        @kb.add("c-o", filter=line_empty)
        def _expand(event: KeyPressEvent) -> None:
            """Ctrl-O on an empty line: the last collapsed tool result, whole (``/last``)."""
            event.app.exit(result="/last")

        @kb.add("s-tab", filter=~has_completions)
        def _cycle(event: KeyPressEvent) -> None:
            """shift+tab: the next permission mode (Claude Code's cycle); the toolbar shows it."""
            self.on_mode_cycle()

        @kb.add(Keys.BracketedPaste)
        def _paste(event: KeyPressEvent) -> None:
            """A large paste shows as ``[Pasted text #1 +300 lines]`` and is sent whole."""
            event.current_buffer.insert_text(self.pastes.add(event.data))

        @kb.add("c-c", filter=Condition(lambda: self.running()))
        def _stop(event: KeyPressEvent) -> None:
            """Ctrl-C with a speculation in flight stops it (the line stays); the next Ctrl-C clears the line."""
            with self._lock:
                self._prediction = None
            event.current_buffer.suggestion = None
            self.on_stop()

        return kb

    # -- trio side ----------------------------------------------------------------------------------------
    def prompt_blocking(self) -> str:
        """One line (blocking; run in a worker thread). KeyboardInterrupt on Ctrl-C, EOFError on Ctrl-D."""
        if self._closed:
            raise EOFError
        return self.pastes.expand(self.session.prompt(self.message, pre_run=self._pre_run))

    def hold_typeahead(self) -> None:
        """The turn was cancelled: what was typed during it stays in the next prompt, but its Enter keys do
        not send it (a trailing one is dropped, others become newlines); only a fresh Enter does."""
        self._held = True

    def _pre_run(self) -> None:
        if self._closed:  # aborted between the check above and the prompt starting
            self.session.app.exit(exception=EOFError())
            return
        self._apply()
        ahead, self.typeahead = self.typeahead, ""
        held, self._held = self._held, False
        if ahead:  # keys typed during the turn, Enter included, as if typed now (once the prompt runs)
            presses: list[KeyPress] = []
            parser = Vt100Parser(presses.append)
            parser.feed(ahead)
            parser.flush()
            if held:
                presses = unsent(presses)
            app = self.session.app

            def replay() -> None:
                app.key_processor.feed_multiple(presses)
                app.key_processor.process_keys()

            assert app.loop is not None
            app.loop.call_soon(replay)

    async def read(self) -> str:
        return await trio.to_thread.run_sync(self.prompt_blocking)

    async def keys_during_turn(
        self, on_escape: Callable[[], None], on_expand: Callable[[], None] | None = None
    ) -> None:
        """While a turn streams (no prompt running): read the terminal without echo, so Esc interrupts the
        turn instead of printing ``^[`` and eating the next key; Ctrl-O shows the last collapsed result
        whole; other keys are kept for the next prompt (and shown on the turn's live line). Ctrl-C stays
        SIGINT. Returns at once when stdin is not a terminal; cancel it to stop."""
        fd = tty_fd(self._io["input"])
        if fd is None:
            await trio.sleep_forever()
            return
        saved = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[0] &= ~termios.ICRNL  # Enter stays \r (a \n would be Ctrl-J: a newline in the next prompt)
        quiet[3] &= ~(termios.ICANON | termios.ECHO)
        quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        try:
            while True:
                await trio.lowlevel.wait_readable(fd)
                data = os.read(fd, 1024)
                if not data:
                    return
                if data == b"\x1b":  # a lone Esc (arrows and other sequences arrive whole: b"\x1b[A")
                    on_escape()
                elif data == b"\x0f" and on_expand is not None:
                    on_expand()
                else:
                    self.typeahead += data.decode(errors="ignore")
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)

    async def ask(self, question: str, choices: Sequence[str]) -> str:
        """A one-off question (permission prompt) answered by one of ``choices`` or a unique prefix; Esc
        answers no (``n``, the last-but-one choice of y/n/always)."""
        kb = KeyBindings()
        no = "n" if "n" in choices else choices[-1]

        @kb.add("escape", eager=True)
        def _no(event: KeyPressEvent) -> None:
            event.current_buffer.text = no  # shown as typed, so the screen says what was answered
            event.current_buffer.validate_and_handle()

        ps: PromptSession[str] = PromptSession(key_bindings=kb, **self._io)
        withdrawn = threading.Event()  # the turn was cancelled (Ctrl-C before the prompt took the terminal)

        def leave_if_withdrawn() -> None:
            if withdrawn.is_set():
                ps.app.exit(exception=KeyboardInterrupt())

        def blocking() -> str:
            while True:
                if self._closed:
                    raise EOFError
                raw = ps.prompt(f"{visible(question)} [{'/'.join(choices)}] ", pre_run=leave_if_withdrawn)
                try:
                    return choose(raw, choices)
                except BadAnswer as e:
                    print_formatted_text(f"  {visible(str(e))}", output=self._io["output"])

        async def withdraw_on_cancel() -> None:
            try:
                await trio.sleep_forever()
            finally:  # cancelled: end the question, so the worker thread returns
                withdrawn.set()
                loop = ps.app.loop
                if loop is not None and ps.app.is_running:
                    try:
                        loop.call_soon_threadsafe(leave_if_withdrawn)
                    except RuntimeError:
                        pass  # its loop just closed: the thread is returning anyway

        self._asking = ps
        failure: BaseException | None = None  # raised bare, not wrapped in the nursery's group
        answer = no
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(withdraw_on_cancel)
                try:
                    answer = await trio.to_thread.run_sync(blocking)
                except (KeyboardInterrupt, EOFError) as e:
                    failure = e
                nursery.cancel_scope.cancel()
        finally:
            self._asking = None
        if failure is not None:
            raise failure
        return answer


def _leave(app: Application[Any]) -> None:
    """End ``app``'s prompt as Ctrl-D would, if it is still running (called in its loop)."""
    if app.is_running and not app.is_done:
        app.exit(exception=EOFError())
