"""What the speculation engine writes down: a speculation closed (its outcome, duration, tokens and cost,
its overlay discarded, a pipelined suggestion that dies with it), a suggestion's record once the user
decided, one cut mid-request, and the state events the toolbar follows.
:class:`~speculate.speculation.engine.SpeculationEngine` is one of these."""

from __future__ import annotations

import time
from typing import Any

from speculate.models.billing import Meter
from speculate.models.profiles import cost_usd
from speculate.speculation import suggest
from speculate.speculation.events import SpecEvent, SpecOutcome, State, SuggestionOutcome, SuggestionRecord
from speculate.speculation.fork import Speculation
from speculate.speculation.host import Host
from speculate.speculation.policy import SpecPolicy
from speculate.speculation.topk import ForkSet


class EngineRecords:
    """The engine's bookkeeping; :class:`~speculate.speculation.engine.SpeculationEngine` sets these."""

    s: Host
    policy: SpecPolicy
    candidates: list[str]
    state: State
    _spec: Speculation | None
    _sugg_rec: SuggestionRecord | None
    _sugg_shown_at: float
    forks: ForkSet

    def _suggestion_record(
        self, out: suggest.SuggestionOutcome, turn: int, *, pipelined: bool
    ) -> SuggestionRecord:
        return SuggestionRecord(
            turn=turn,
            text=out.text or "",
            generation_s=out.duration_s,
            candidates=out.texts if len(out.texts) > 1 else [],
            pipelined=pipelined,
            tokens=out.usage.as_dict(),
            cost_usd=cost_usd(self.s.cfg.model_name, out.usage),
        )

    def _decide_suggestion(self, outcome: SuggestionOutcome, prompt: str | None = None) -> None:
        rec, self._sugg_rec = self._sugg_rec, None
        if rec is None:
            return
        if rec.outcome != "abstained":  # abstained stays what it is; `chosen` says what the user did
            rec.outcome = outcome
        cands = self.candidates or [rec.text]
        rec.chosen = cands.index(prompt) if prompt in cands else None
        rec.time_to_decision_s = time.perf_counter() - self._sugg_shown_at
        self.policy.observe_choice(rec.decisions, rec.chosen, time_to_decision_s=rec.time_to_decision_s)
        self.s.events.write(rec)

    def _close(
        self,
        spec: Speculation,
        outcome: SpecOutcome,
        reason: str,
        *,
        saved: bool = True,
        abort_started: float | None = None,
    ) -> None:
        rec = spec.record
        rec.outcome, rec.reason = outcome, reason
        end = spec.finished_at if spec.finished_at is not None else time.perf_counter()
        rec.duration_s = end - spec.started
        rec.tools_run = spec.tools_run
        rec.requests = spec.requests
        usage = spec.usage.add(spec.meter.usage)  # a request cut mid-stream is billed too
        rec.tokens = usage.as_dict()
        if spec.diverged_at_tokens is not None:
            rec.tokens_after_divergence = sum(rec.tokens.values()) - spec.diverged_at_tokens
        rec.cost_usd = cost_usd(self.s.cfg.model_name, usage)
        if spec.record.completed:  # what a whole fork costs, for the policy's next estimate
            self.policy.cost.observe(spec.requests, spec.usage)
        if outcome != "accepted" or not saved:
            rec.time_saved_s = 0.0
        if spec.overlay is not None:
            spec.overlay.discard()  # aborted, or promoted (the upper layer is spent)
        if abort_started is not None:
            rec.abort_s = time.perf_counter() - abort_started
        self.s.events.write(rec)
        if outcome != "accepted" and spec.next is not None:
            # The pipelined suggestion made on this fork's messages dies with it: count it as waste.
            dead = self._suggestion_record(spec.next, rec.turn, pipelined=True)
            dead.outcome, dead.reason = "discarded", f"speculation {outcome}"
            self.s.events.write(dead)
        elif spec.next is None:  # its pipelined suggestion was cut mid-request: billed all the same
            self._cancelled_suggestion(spec.next_meter, rec.turn, pipelined=True)

    def _cancelled_suggestion(self, meter: Meter, turn: int, *, pipelined: bool) -> None:
        """A suggestion request cut mid-stream: recorded as discarded, with what the API bills for it."""
        if meter.cancelled:
            self.s.events.write(
                SuggestionRecord(
                    turn=turn,
                    outcome="discarded",
                    reason="cancelled mid-request",
                    pipelined=pipelined,
                    tokens=meter.usage.as_dict(),
                    cost_usd=cost_usd(self.s.cfg.model_name, meter.usage),
                )
            )

    def _emit_for(self, spec: Speculation, state: State, suggestion: str | None, **detail: Any) -> None:
        # top-K: the toolbar follows the lowest-ranked fork, and says which it is, of how many
        if spec is self._spec:
            self._emit(state, suggestion, rank=spec.rank, forks=len(self.forks.forks), **detail)

    def _emit(self, state: State, suggestion: str | None, **detail: Any) -> None:
        self.state = state
        self.s.on_event(SpecEvent(state, suggestion, detail))
