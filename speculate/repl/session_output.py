"""What the session reports while it runs, shown: streamed model text, each call's line and result (collapsed
past a few lines, ``/last`` shows it whole), hook lines, the speculation state the toolbar follows, a
backend's retry notices. :class:`~speculate.repl.controller.Repl` is one of these."""

from __future__ import annotations

from speculate.agent_types import AgentEvent, ResponseDone, ToolFinished, ToolStarted
from speculate.hooks import HookRan
from speculate.models.base import TextDelta
from speculate.repl.output import Output
from speculate.repl.render import hook_lines, tool_line
from speculate.repl.status import Status
from speculate.repl.toolview import Body, body_lines, tool_body
from speculate.session import Session
from speculate.speculation.events import SpecEvent
from speculate.tools import registry


class SessionOutput(Output):
    """The session's callbacks that only show; :class:`~speculate.repl.controller.Repl` sets these."""

    status: Status
    s: Session | None
    _response_text: str
    _last_response_text: str
    last_body: tuple[str, Body] | None
    turn_edits: list[str]

    def on_event(self, ev: AgentEvent | SpecEvent | HookRan) -> None:
        if isinstance(ev, SpecEvent):
            self.status.update(ev)
            if self.fe is not None:
                self.fe.invalidate()
            return
        if not self.status.busy:
            return  # nothing of the main loop runs between turns; be safe anyway
        line = self.turn_line
        if isinstance(ev, TextDelta):
            self._stream(ev.text)
            self._response_text += ev.text
            if line is not None:
                line.text(ev.text)
        elif isinstance(ev, ResponseDone):
            self._flush_word()
            self._last_response_text, self._response_text = self._response_text, ""
            if line is not None:
                line.response_done(ev.response.usage.output_tokens)
        elif isinstance(ev, ToolFinished):
            self._tool_finished(ev)
        elif isinstance(
            ev, ToolStarted
        ):  # its line comes when it finishes (with its status); the live line names it
            self._newline()
            if line is not None:
                line.tool_started(ev.summary)
        elif isinstance(ev, HookRan):
            for shown in hook_lines(ev):
                self._line(shown)

    def _tool_finished(self, ev: ToolFinished) -> None:
        self._line(tool_line(ev))
        body = tool_body(ev)
        self._lines(body_lines(body))
        if body.hidden > 0:
            self.last_body = (ev.summary, body)
        if self.turn_line is not None:
            self.turn_line.tool_finished()
        landing = self.s.landing if self.s is not None else None
        live = landing is None or landing.promoted or bool(landing.dropped)  # else: a speculation replayed
        path = registry.path_of(ev.name, ev.input) if ev.name in registry.WRITE_TOOLS else None
        if live and path and not ev.is_error:
            self.turn_edits.append(path)

    def show_last(self) -> None:
        """``/last`` (or ctrl+o): the whole result of the last call shown collapsed."""
        if self.last_body is None:
            self._line("nothing collapsed yet: every result so far was shown whole")
            return
        summary, body = self.last_body
        self._line(self._c("1", f"{summary}: all {len(body.full)} lines"))
        self._lines([[("", "  "), *ln] for ln in body.full])

    def notice(self, text: str) -> None:
        """A model backend retrying (a stalled endpoint): said while a turn runs, so it never looks hung."""
        if self.status.busy:
            self._line(self._c("33", f"  ⚠ {text}"))
