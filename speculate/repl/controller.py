"""The REPL's trio side: the read → submit loop, slash commands, streaming output, permission prompts,
Ctrl-C, and feeding predictions and speculation state to whichever front end holds the terminal.

Everything the REPL writes goes through :meth:`speculate.repl.output.Output._write`, which renders it with
:func:`speculate.term.render` (untrusted text shown, never interpreted); a running turn has a live line under
it (:mod:`speculate.repl.turnline`).
What the session reports as it runs is shown by :mod:`speculate.repl.session_output`, a base class of
:class:`Repl`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO, cast

import trio

from speculate.repl.background import Background
from speculate.repl.commands import HELP, MODES, Quit, format_stats, next_mode  # noqa: F401  (re-exported)
from speculate.repl.diffview import summarise_ignored
from speculate.repl.inputs import stray_answer
from speculate.repl.output import columns
from speculate.repl.render import accepted_line, approval_lines, cancelled_line
from speculate.repl.session_output import SessionOutput
from speculate.repl.status import Status
from speculate.repl.toolview import Body, question_lines, small_text
from speculate.repl.turnline import TurnLine
from speculate.session import PermissionMode, Session, TurnOutcome
from speculate.speculation.approvals import PendingApproval
from speculate.speculation.events import SpecEvent
from speculate.speculation.host import IgnoreReason
from speculate.term import visible


class Frontend(Protocol):
    color: bool

    def push(self, prediction: str | None) -> None: ...
    def invalidate(self) -> None: ...
    def abort(self) -> None: ...
    async def read(self) -> str: ...
    async def ask(self, question: str, choices: Sequence[str]) -> str: ...


class Repl(Background, SessionOutput):
    """Owns one REPL run: bind a front end with :meth:`attach`, then ``await run(session)``.

    ``fallback_prediction`` offers a prompt when the engine has none (the simulator demo's next scripted
    prompt; the engine only predicts from the second turn on); ``on_submitted`` hears every prompt sent.
    """

    def __init__(
        self,
        *,
        out: TextIO | None = None,
        model_label: str = "",
        fallback_prediction: Callable[[], str | None] | None = None,
        on_submitted: Callable[[str], None] | None = None,
        on_cleared: Callable[[], None] | None = None,
        policy: str = "keep",
    ) -> None:
        super().__init__(out)
        self.model_label = model_label
        self.fallback = fallback_prediction or (lambda: None)
        self.on_submitted = on_submitted or (lambda p: None)
        self.on_cleared = on_cleared or (lambda: None)
        self.status = Status()
        self.fe: Frontend | None = None
        self.s: Session | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._turn_scope: trio.CancelScope | None = None
        self._predict_scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None
        self._response_text = ""
        self._last_response_text = ""
        self.policy = policy  # typing off the prediction: keep the speculation, or abort it
        self._keys_scope: trio.CancelScope | None = None
        self._keys_stopped = trio.Event()
        self.signal: int | None = None  # SIGHUP or SIGTERM ended the run (the caller exits 128 + it)
        self.scripted_offered = 0  # the demo's scripted prompts shown where the model had no suggestion
        self.last_body: tuple[str, Body] | None = None  # the last call whose result was collapsed (/last)
        self.turn_edits: list[str] = []  # files the live path edited this turn (a cancelled turn names them)
        self.study: Any = None  # speculate.study.recorder.StudyRecorder of `repl --study DIR` (/study)
        self.last_diff = ""  # the last accepted change that changed something (/diff last)
        self._note_shown = ""  # a dropped speculation's note, said before the live answer it introduces
        self._answered = False  # the last thing that happened at the prompt was a question answered
        self.bypass = False  # shift+tab's cycle includes bypassPermissions (the session started in it)

    def attach(self, fe: Frontend) -> None:
        self.fe = fe

    # -- callbacks the session calls (those that only show are SessionOutput's) ---------------------------
    async def ask(self, tool: str, summary: str) -> Literal["y", "n", "always"]:
        """Permission prompt (default mode): the call with all its arguments, a Write's or Edit's diff, what
        ``always`` allows. Esc or Ctrl-C here answers no (Ctrl-C also cancels the turn)."""
        q = self.s.authorizer.question if self.s is not None else None
        if q is not None:
            self._newline()
            self._lines(question_lines(q.tool, q.input, q.rule, self._read_for_diff))
        return await self._question(f"allow {visible(summary)}?")

    def _read_for_diff(self, path: str) -> str | None:
        return small_text(Path(path) if Path(path).is_absolute() or self.s is None else self.s.project / path)

    async def approve(self, pending: Sequence[PendingApproval]) -> Literal["y", "n", "always"]:
        """On accepting a speculation that ran calls the live path would have asked about: show them with
        what each changed, and ask once. ``always`` also allows each command from now on (its rule)."""
        for line in approval_lines(pending, self.s.project if self.s is not None else None):
            self._line(self._c("33", line))
        return await self._question("accept the speculation with what it ran?")

    async def _question(self, text: str) -> Literal["y", "n", "always"]:
        assert self.fe is not None
        self._newline()
        self._pause_turn_line(True)
        await self._stop_keys()  # the question reads the terminal itself
        self._answered = True
        try:
            answer = await self.fe.ask(text, ("y", "n", "always"))
        except (KeyboardInterrupt, EOFError):
            if self._turn_scope is not None:
                self._turn_scope.cancel()
            return "n"
        finally:
            self._at_line_start = True
            self._pause_turn_line(False)
            self._start_keys()
        return cast(Literal["y", "n", "always"], answer)

    def diverged(self) -> None:
        """The user typed off the prediction (called from the prompt's thread). ``keep``: the speculation
        runs on (the cost is recorded) until a different prompt is submitted; ``abort``: drop it now."""

        def start() -> None:
            if self.policy == "keep":
                if self.s is not None:
                    self.s.diverged()
                return
            self._cancel_prediction()
            assert self._nursery is not None
            self._nursery.start_soon(self._ignore)

        self._from_thread(start)

    def stop_speculation(self) -> None:
        """Ctrl-C at the prompt with a speculation in flight (prompt's thread): stop and discard it."""

        def start() -> None:
            self._cancel_prediction()
            assert self._nursery is not None
            self._nursery.start_soon(self._ignore, "stopped")

        self._from_thread(start)

    def speculation_running(self) -> bool:
        return (
            self.status.spec_on
            and not self.status.busy
            and self.status.state in ("generating", "speculating")
        )

    def _from_thread(self, fn: Callable[[], None]) -> None:
        if self._token is None or self._nursery is None:
            return
        try:
            self._token.run_sync_soon(fn)
        except trio.RunFinishedError:
            pass

    async def _ignore(self, reason: IgnoreReason = "typed") -> None:
        if self.s is not None and self.s.cfg.speculate:
            await self.s.dismiss(reason)

    # -- the loop -------------------------------------------------------------------------------------------
    async def run(self, session: Session, signals: Any = None) -> None:
        """Read and submit until /quit, Ctrl-D, end of input, or one of ``signals`` (a trio signal receiver
        for SIGHUP/SIGTERM, opened by the caller before anything needing cleanup was made)."""
        assert self.fe is not None, "attach a front end first"
        self.s = session
        self._token = trio.lowlevel.current_trio_token()
        self.status.mode, self.status.spec_on = session.cfg.mode, session.cfg.speculate
        self.bypass = session.cfg.mode == "bypassPermissions"  # shift+tab may come back to it
        self._save(mode=session.cfg.mode)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._watch_sigint)
            if signals is not None:
                nursery.start_soon(self._watch_exit_signals, signals)
            self._predict_next()
            try:
                while self.signal is None:
                    try:
                        line = await self.fe.read()
                    except KeyboardInterrupt:
                        continue  # Ctrl-C at the prompt clears the line
                    except (EOFError, OSError):  # Ctrl-D, end of input, or the terminal went away
                        break
                    if self.signal is not None:
                        break
                    try:
                        await self.handle(line)
                    except Quit:
                        break
            finally:
                self._cancel_prediction()
                self.fe.push(None)
                nursery.cancel_scope.cancel()

    async def _watch_exit_signals(self, signals: Any) -> None:
        """SIGHUP (terminal closed) or SIGTERM: stop the turn and the prompt, and leave through the normal
        exit path, so the session, its overlays and the temporary directories are cleaned up."""
        async for signum in signals:
            self.signal = signum
            if self._turn_scope is not None:
                self._turn_scope.cancel()
            if self.fe is not None:
                self.fe.abort()
            return

    async def handle(self, line: str) -> None:
        from speculate.repl import shortcuts

        text = line.strip()
        answered, self._answered = self._answered, False
        if not text:
            return
        if answered and stray_answer(text):  # typed ahead for a question that was already answered
            self._line(self._c("2", f"({text!r} not sent: the question it answers was already answered)"))
            return
        if text.startswith("/"):
            await self.command(text)
        elif text.startswith("!") and len(text) > 1:
            await shortcuts.bash_mode(self, text[1:].strip())
        elif text.startswith("#") and len(text) > 1 and not text.startswith("#!"):
            await shortcuts.memory(self, text[1:].strip())
        else:
            prompt = line.rstrip("\n")
            if await shortcuts.attach_mentions(self, prompt):
                await self.submit(prompt)

    def set_mode(self, mode: str) -> None:
        """/mode or shift+tab: the session's permission mode, shown in the toolbar."""
        assert self.s is not None
        self.s.set_mode(cast(PermissionMode, mode))
        self.status.mode = mode
        self._save(mode=mode)
        if self.fe is not None:
            self.fe.invalidate()

    def _save(self, **what: Any) -> None:
        """A line of the REPL's state in the saved session (--continue restores it)."""
        if self.s is not None and self.s.transcript is not None:
            self.s.transcript.write("repl", **what)

    def cycle_mode(self) -> None:
        """shift+tab (in the prompt's thread): the next mode of Claude Code's cycle."""

        def step() -> None:
            if self.s is None:
                return
            self.set_mode(next_mode(self.s.cfg.mode, bypass=self.bypass))

        self._from_thread(step)

    async def submit(self, prompt: str) -> TurnOutcome | None:
        assert self.s is not None and self.fe is not None
        self._cancel_prediction()
        self.fe.push(None)
        self.on_submitted(prompt)
        self.status.busy = True
        self._response_text = self._last_response_text = ""
        self.turn_edits = []
        self._note_shown = ""
        outcome: TurnOutcome | None = None
        line_scope = trio.CancelScope()
        assert self._nursery is not None
        self._nursery.start_soon(self._run_turn_line, line_scope)
        with trio.CancelScope() as scope:
            self._turn_scope = scope
            self._start_keys()
            try:
                outcome = await self.s.submit(prompt)
            except (
                Exception
            ) as e:  # a bug below us ends this turn, not the REPL; the conversation is repaired
                self._line(
                    self._c("31", f"error: the turn failed: {type(e).__name__}: {e}; the session goes on")
                )
            finally:
                self._turn_scope = None
                self.status.busy = False
                line_scope.cancel()
                self._erase_turn_line()
                with trio.CancelScope(shield=True):
                    await self._stop_keys()
        if scope.cancelled_caught:
            self._line(self._c("33", cancelled_line(self.s.landing, self.turn_edits)))
            hold = getattr(self.fe, "hold_typeahead", None)
            if hold is not None:  # keys typed during a cancelled turn: kept, but sent only by a fresh Enter
                hold()
        elif outcome is not None:
            self._report(outcome)
        accepted = self.s.accepted_diff()
        if accepted and accepted != self.last_diff and summarise_ignored(self.s.project, accepted)[0].strip():
            # one that changed nothing (or only files git ignores) leaves the last real change shown
            self.last_diff = accepted
            self._save(last_diff=accepted)
        self.status.saved_s = float(self.s.statistics().get("time_saved_s", self.status.saved_s))
        # A turn leaves garbage in reference cycles (streams, tasks, tool contexts) that the collector's
        # oldest generation would reach only every hundred turns or so, by when the allocator's high-water
        # mark has risen for good: collected here, the session's memory stays flat (#37; scripts/repl_rss.py).
        # Cheap: what the session started with is frozen out of the collector's walk (main.py).
        gc.collect()
        self._predict_next()
        return outcome

    def on_event(self, ev: Any) -> None:
        # A speculation dropped at acceptance: its note comes before the live answer that replaces it.
        landing = self.s.landing if self.s is not None and self.status.busy else None
        if (
            landing is not None
            and landing.dropped
            and not self._note_shown
            and self.study is None  # in a study it would tell the arm
            and not isinstance(ev, SpecEvent)
        ):
            self._note_shown = landing.dropped
            self._line(self._c("33", landing.dropped))
        super().on_event(ev)

    def _report(self, o: TurnOutcome) -> None:
        if o.accepted and o.speculation is not None and self.study is None:  # in a study it tells the arm
            rec = o.speculation
            self._line(
                self._c(
                    "36",
                    accepted_line(
                        rec.files_written,
                        rec.tools_run,
                        rec.time_saved_s,
                        columns(),
                        deleted=rec.files_deleted,
                        renamed=rec.files_renamed,
                    ),
                )
            )
        spec_note = self.s is not None and self.s.landing is not None  # it says a speculation was used
        if o.note and o.note != self._note_shown and not (spec_note and self.study is not None):
            self._line(self._c("33", o.note))
        if o.blocked:
            self._line(self._c("35", f"⛔ prompt blocked by a UserPromptSubmit hook (not sent): {o.blocked}"))
        if o.error:
            self._line(self._c("31", f"error: {o.error}"))
        elif o.text.strip() and o.text.strip() != self._last_response_text.strip():
            self._newline()
            self._write(o.text)  # the final answer came from the speculation, not the stream
        self._newline()
        self._line(self._c("2", f"({o.latency_s:.1f}s)"))

    async def _run_turn_line(self, scope: trio.CancelScope) -> None:
        with scope:
            await self._turn_line_task(TurnLine())

    # -- slash commands (speculate.repl.commands) -------------------------------------------------------
    async def command(self, text: str) -> None:
        from speculate.repl.commands import run_command

        await run_command(self, text)
