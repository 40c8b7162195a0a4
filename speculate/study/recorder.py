"""One study session's recorder: it draws each turn's arm, times the turn, classifies what was done with the
suggestion and writes the records (:mod:`speculate.study.records`).

It knows nothing of terminals: a front end (the REPL's glue, :mod:`speculate.repl.study`, or a program such as
the simulated user of ``bench/study_sim.py``) tells it what happened, in this order per turn::

    rec.offer(text, source)    # ghost text about to be shown: returned as shown (None in the plain arm)
    rec.key(took_ghost=...)    # each change of the input line (the first one times thinking)
    rec.submitted(prompt)      # Enter
    rec.on_event(ev)           # the session's events (the first text token times the answer's start)
    # ... the session calls rec.turn_ended(outcome) as the turn ends, before the next cycle starts: the next
    # turn's arm is drawn there and applied to the session, so the fork (if any) starts under it.

Calls may come from the prompt's thread (keys) and trio's (the rest): the open prompt's state is under a lock.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from speculate.models.base import TextDelta, Usage
from speculate.models.profiles import cost_usd
from speculate.speculation.events import SpeculationRecord, SuggestionRecord
from speculate.study import arms as armlib
from speculate.study.arms import Arm, Assigner
from speculate.study.classify import TAB_EDIT_SIMILARITY, TYPED_EDIT_SIMILARITY, classify
from speculate.study.records import (
    Assignment,
    SessionEnd,
    SessionStart,
    SpeculationSummary,
    TurnRecord,
    _Record,
)

if TYPE_CHECKING:
    from speculate.session import Session, TurnOutcome

Source = Literal["model", "script"]
REASON_CHARS = 300  # a conflict's reason lists every path; the kind of outcome is what the study needs
TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


@dataclass
class _Prompt:
    """What happened while one prompt was open (times on the recorder's monotonic clock)."""

    ready: float
    ready_at: float
    eligible: bool
    suggestion: str | None = None
    source: Source | None = None
    shown: float | None = None
    first_key: float | None = None
    took_ghost: bool = False
    ghost_taken: float | None = None
    accept_command: bool = False  # /accept (line mode's Tab line): sends the suggestion, shown or not yet
    typed_ahead: bool = False
    commands: int = 0
    submit: float | None = None
    prompt: str = ""
    first_token: float | None = None
    questions: int = 0
    question_s: float = 0.0


@dataclass(frozen=True)
class Past:
    """A finished turn as /study lists it."""

    turn: int
    arm: Arm
    source: Source | None
    taken: str
    latency_s: float
    accepted: bool
    error: str
    fork_possible: bool = True


class StudyRecorder:
    def __init__(
        self,
        *,
        study_dir: Path,
        user: str,
        seed: int,
        arms: Sequence[Arm] = armlib.DEFAULT_ARMS,
        model: str,
        frontend: Literal["prompt", "plain", "api"],
        time_scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.dir = study_dir
        self.user = user
        self.assigner = Assigner(seed=seed, arms=arms)
        self.model, self.model_name, self.frontend, self.time_scale = model, "", frontend, time_scale
        self.clock, self.wall = clock, wall
        self.id = uuid.uuid4().hex[:12]
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(wall()))
        self.path = study_dir / "sessions" / f"{stamp}-{self.id}.jsonl"
        self.session: Session | None = None
        self.turn = 0  # turns recorded so far
        self.arm: Arm = "speculative"  # the open (next) turn's arm, drawn when the previous one ended
        self.past: list[Past] = []
        self._lock = threading.Lock()
        self._open = _Prompt(ready=clock(), ready_at=wall(), eligible=False)
        self._in_turn = False
        self._events_seen = 0
        self._closed = False

    @property
    def seed(self) -> int:
        return self.assigner.seed

    # -- set-up and tear-down -----------------------------------------------------------------------------
    def attach(self, session: Session) -> None:
        """Bind to ``session``: write the header, draw the first turn's arm and apply it."""
        self.session = session
        self.model_name = session.cfg.model_name  # what its costs are priced at
        session.on_turn_end = self.turn_ended
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write(
            SessionStart(
                session=self.id,
                user=self.user,
                seed=self.seed,
                arms=list(self.assigner.arms),
                started=self.wall(),
                model=self.model,
                model_name=self.model_name,
                frontend=self.frontend,
                time_scale=self.time_scale,
                edit_similarity={"after_tab": TAB_EDIT_SIMILARITY, "typed": TYPED_EDIT_SIMILARITY},
            )
        )
        self._events_seen = session.events.written
        self._assign(after=0)
        self._open = _Prompt(ready=self.clock(), ready_at=self.wall(), eligible=False)

    def close(self) -> None:
        """The run ends: a turn still in flight is recorded as cut, then the end record with what the last,
        never-decided cycle cost (the session has shut its engine down by now, or does so after)."""
        if self._closed or self.session is None:
            return
        self.prompt_open()
        tokens, cost, _, _ = self._engine_since()
        self._write(
            SessionEnd(
                session=self.id,
                turns=self.turn,
                ended=self.wall(),
                trailing_engine_cost_usd=cost,
                trailing_engine_tokens=tokens,
            )
        )
        self._closed = True

    # -- what the front end reports ----------------------------------------------------------------------
    def offer(self, text: str | None, source: Source = "model") -> str | None:
        """Ghost text about to be shown for the open prompt; what to show instead (None in the plain arm)."""
        self.prompt_open()
        if text is None or self.arm == "plain":
            return None
        with self._lock:
            p = self._open
            if text != p.suggestion:
                p.suggestion, p.source, p.shown = text, source, self.clock()
        return text

    def key(self, *, took_ghost: bool = False) -> None:
        """The input line changed (a key, or Tab/Right taking the ghost text)."""
        now = self.clock()
        with self._lock:
            p = self._open
            if p.first_key is None:
                p.first_key = now
            if took_ghost and not p.took_ghost:
                p.took_ghost, p.ghost_taken = True, now

    def accept_command(self) -> None:
        """/accept: the suggestion is sent as it is, once it exists (it may not have been shown yet)."""
        self.key(took_ghost=True)
        with self._lock:
            self._open.accept_command = True

    def typed_ahead(self) -> None:
        """Keys typed during the previous turn start this prompt: its think and typing times are unknown."""
        with self._lock:
            self._open.typed_ahead = True

    def command(self) -> None:
        """A slash command was sent from the prompt: the keys so far were the command's, not the prompt's."""
        with self._lock:
            p = self._open
            p.commands += 1
            p.first_key, p.took_ghost, p.ghost_taken, p.accept_command = None, False, None, False

    def cleared(self) -> None:
        """/clear: the open prompt starts a new conversation (no cycle ran for it)."""
        with self._lock:
            self._open.eligible = False

    def submitted(self, prompt: str) -> None:
        self.prompt_open()
        now = self.clock()
        with self._lock:
            p = self._open
            p.submit, p.prompt = now, prompt
            if p.accept_command and p.suggestion != prompt and self.arm != "plain":
                # /accept waited for a suggestion never shown as ghost text: it is shown now, as it is sent.
                model = self.session is not None and self.session.suggestion == prompt
                p.suggestion, p.source, p.shown = prompt, "model" if model else "script", now
        self._in_turn = True

    def on_event(self, ev: Any) -> None:
        """Every event of the session (pass it on to the REPL's handler too): the answer's first token."""
        if self._in_turn and isinstance(ev, TextDelta) and self._open.first_token is None:
            self._open.first_token = self.clock()

    def asked(self, seconds: float) -> None:
        """A permission or approval question was answered during the turn, after ``seconds``."""
        if self._in_turn:
            self._open.questions += 1
            self._open.question_s += seconds

    def reading(self) -> None:
        """The front end reads a line again. After /accept that sent nothing (no suggestion), the keys so far
        were a command's."""
        self.prompt_open()
        if self._open.accept_command:
            self.command()

    def prompt_open(self) -> None:
        """A prompt is open again; if the last turn never ended (cancelled, or it failed), record it so."""
        if self._in_turn:
            self._finish(None, error="cancelled or failed before its end")

    # -- called by the session as a turn ends ------------------------------------------------------------
    def turn_ended(self, outcome: TurnOutcome) -> None:
        self._finish(
            outcome,
            error=outcome.error
            or (f"blocked: {outcome.blocked}" if outcome.blocked else "")
            or (f"stopped by a hook: {outcome.stopped}" if outcome.stopped else ""),
        )

    def _finish(self, o: TurnOutcome | None, *, error: str) -> None:
        assert self.session is not None
        end = self.clock()
        self._in_turn = False
        with self._lock:
            p = self._open
        assert p.submit is not None
        self.turn += 1
        taken, sim = classify(p.suggestion, p.prompt, took_ghost=p.took_ghost)
        key = None if p.typed_ahead else p.first_key
        tokens, engine_cost, sugg, spec = self._engine_since()
        usage = o.result.usage if o is not None and o.result is not None else Usage()
        rec = TurnRecord(
            session=self.id,
            turn=self.turn,
            conversation_turn=self.session.turn,
            arm=self.arm,
            eligible=p.eligible,
            ready_at=p.ready_at,
            suggestion=p.suggestion,
            suggestion_source=p.source,
            shown_s=_rel(p.shown, p.ready),
            first_key_s=_rel(key, p.ready),
            took_ghost=p.took_ghost,
            ghost_taken_s=_rel(p.ghost_taken, p.ready),
            submit_s=p.submit - p.ready,
            typed_ahead=p.typed_ahead,
            commands=p.commands,
            prompt=p.prompt,
            taken=taken,
            similarity=sim,
            think_s=key - p.shown if key is not None and p.shown is not None and key >= p.shown else None,
            typing_s=p.submit - key if key is not None else None,
            ttft_s=_rel(p.first_token, p.submit),
            latency_s=end - p.submit,
            questions=p.questions,
            question_s=p.question_s,
            accepted=bool(o is not None and o.accepted),
            tokens=usage.as_dict(),
            cost_usd=cost_usd(self.model_name, usage),
            engine_tokens=tokens,
            engine_cost_usd=engine_cost,
            suggestion_outcome=sugg.outcome if sugg is not None else "",
            fork_possible=p.source == "model",
            speculation=_summary(spec) if spec is not None else None,
            error=error,
            note=o.note if o is not None else "",
        )
        self._write(rec)
        self.past.append(
            Past(self.turn, self.arm, p.source, taken, rec.latency_s, rec.accepted, error, rec.fork_possible)
        )
        # The next turn: eligible when a cycle will start now whatever its arm (the session starts one after a
        # clean turn); its arm is drawn and applied before the session starts that cycle.
        self._assign(after=self.turn)
        self._open = _Prompt(ready=self.clock(), ready_at=self.wall(), eligible=o is not None and not error)

    def _assign(self, *, after: int) -> None:
        assert self.session is not None
        self.arm = self.assigner.draw()
        armlib.apply(self.session.cfg, self.arm)
        self._write(
            Assignment(
                session=self.id,
                turn=after + 1,
                arm=self.arm,
                seed=self.seed,
                draw=self.assigner.draws,
                after_turn=after,
                at=self.wall(),
            )
        )

    def _engine_since(
        self,
    ) -> tuple[dict[str, int], float, SuggestionRecord | None, SpeculationRecord | None]:
        """The engine's records written since the last call: their tokens and cost, the model suggestion the
        person decided on (accepted or ignored), and the last speculation."""
        assert self.session is not None
        recs = self.session.events.since(self._events_seen)
        self._events_seen = self.session.events.written
        tokens = dict.fromkeys(TOKEN_KINDS, 0)
        for r in recs:
            for k in TOKEN_KINDS:
                tokens[k] += int(r.tokens.get(k, 0))
        decided = [
            r for r in recs if isinstance(r, SuggestionRecord) and r.outcome in ("accepted", "ignored")
        ]
        specs = [r for r in recs if isinstance(r, SpeculationRecord)]
        return (
            tokens,
            sum(r.cost_usd for r in recs),
            decided[-1] if decided else None,
            specs[-1] if specs else None,
        )

    def _write(self, rec: _Record) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(rec.model_dump_json() + "\n")

    # -- what the person may see ----------------------------------------------------------------------------
    def summary(self) -> str:
        """What the exit says without being asked: how many turns were recorded, and where (not their arms)."""
        return (
            f"study: {len(self.past)} turn{'s' * (len(self.past) != 1)} recorded in {self.path} "
            f"(seed {self.seed}, arms {', '.join(self.assigner.arms)})"
        )

    def listing(self) -> str:
        """On request (/study, or the exit with --study-reveal): the arm of every finished turn (never the
        open one's)."""
        head = self.summary()
        if not self.past:
            return head
        rows = [f"  {'turn':>4}  {'arm':<11}  {'ghost text':<10}  {'you':<7}  answer"]
        for t in self.past:
            ghost = {"model": "model", "script": "demo", None: "none"}[t.source]
            what = (
                f"{t.latency_s:.1f}s"
                + (" (speculation used)" if t.accepted else "")
                + (f" ({t.error})" if t.error else "")
            )
            if t.arm == "speculative" and not t.fork_possible:
                what += " (no fork possible: no model suggestion)"
            rows.append(f"  {t.turn:>4}  {t.arm:<11}  {ghost:<10}  {t.taken:<7}  {what}")
        return "\n".join(
            [head, *rows, "  (the open turn's arm is drawn already; it is listed once the turn is over)"]
        )


def _rel(t: float | None, base: float) -> float | None:
    return None if t is None else t - base


def _summary(r: SpeculationRecord) -> SpeculationSummary:
    return SpeculationSummary(
        outcome=r.outcome,
        reason=r.reason[:REASON_CHARS],
        boundary=r.boundary,
        completed=r.completed,
        duration_s=r.duration_s,
        time_saved_s=r.time_saved_s,
        tools_run=r.tools_run,
    )
