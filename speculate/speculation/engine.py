"""The speculation engine: after each turn, suggest the next prompt and run it on an overlay.

One *cycle* per completed main turn runs in the engine's own nursery (:meth:`SpeculationEngine.running`:
no cycle outlives the engine) under its own cancel scope:
suggestion (or a pipelined one) → fork on a fresh overlay → stop at complete or a boundary → (complete)
pipelined next suggestion. With top-K (``speculation.candidates``) the suggestion holds K candidates, and
the cycle forks those the policy chooses (:mod:`speculate.speculation.policy`: where the expected saving is
worth the cost; every one by default), each on its own overlay (:mod:`speculate.speculation.topk`; one fork
runs in :mod:`speculate.speculation.forkrun`). ``accept`` keeps the fork of the candidate sent (discarding
the others), asks about the calls it ran that the live path would have asked about, then promotes and hands
the session an :class:`~speculate.speculation.accept.Acceptance` (the promoted messages and what to run
next), which the session acts on; ``ignore`` cancels the cycle and discards the overlays. Nothing but
``accept`` writes the real tree, and nothing here runs a turn or changes the session's conversation. See
docs/speculation.md for the state machine.
What it writes down (records, costs, state events) is :mod:`speculate.speculation.engine_records`' part
of the class.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from speculate.compaction import context_tokens
from speculate.errors import InternalError
from speculate.models.base import ModelError
from speculate.models.billing import Meter, billed_to
from speculate.speculation import policy, suggest, topk
from speculate.speculation.accept import Acceptance, Landing
from speculate.speculation.diffcap import landing_diff, overlay_diff
from speculate.speculation.engine_records import EngineRecords
from speculate.speculation.events import SpecOutcome, State, SuggestionRecord
from speculate.speculation.fork import Speculation
from speculate.speculation.forkrun import ForkRunner
from speculate.speculation.host import Host, IgnoreReason, TurnState
from speculate.speculation.trim import completed_part


class SpeculationEngine(EngineRecords):
    def __init__(self, *, session: Host) -> None:
        self.s = session
        self._nursery: trio.Nursery | None = None  # while running(): where the cycles run
        self.suggestion: str | None = None
        self._suggestion_ready = trio.Event()
        self._suggestion_ready.set()
        self._sugg_rec: SuggestionRecord | None = None
        self._sugg_shown_at = 0.0
        self._spec: Speculation | None = None
        self._scope: trio.CancelScope | None = None
        self._cycle_done = trio.Event()
        self._cycle_done.set()
        self._pipelined_from: Speculation | None = None
        self.candidates: list[str] = []  # the suggestion's candidates (top-K), the first = ``suggestion``
        self.opts = policy.options_for(session.cfg, session.workspace.settings)
        self.policy = policy.for_session(session, self.opts)
        self.forks = topk.ForkSet(token_budget=self.opts.budget_tokens, cpus=self.opts.budget_cpus)
        self.state: State = "idle"
        self.runner = ForkRunner(
            session=session,
            forks=self.forks,
            emit=self._emit_for,
            k=self.opts.candidates,
            defer_edits=self.opts.edits == "ask",
        )
        self.landing: Landing | None = None  # this turn's accepted speculation: did it land (accept.Landing)
        self.accepted_diff = ""  # what the last speculation that landed changed (keep_accepted_diff)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The engine's lifetime: its cycles run in a nursery of its own, and none outlives it. On the way
        out the speculation is dropped (its overlays discarded) and the policy's history kept."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                with trio.CancelScope(shield=True):
                    await self.shutdown()
                self._nursery = None
                nursery.cancel_scope.cancel()

    # -- driven by the session -----------------------------------------------------------------------
    def after_turn(self, state: TurnState, *, pipelined: bool) -> None:
        """Start the next cycle (the previous one is over: accepted or ignored) from ``state``."""
        if self._nursery is None:
            raise InternalError("after_turn outside SpeculationEngine.running()")
        self.suggestion = None
        self.candidates = []
        self.forks.take_all()  # the last cycle's forks were accepted or discarded
        self.policy.new_cycle()
        self._suggestion_ready = trio.Event()
        self._cycle_done = trio.Event()
        source = self._pipelined_from if pipelined else None
        self._pipelined_from = None
        scope = self._scope = trio.CancelScope()
        self._nursery.start_soon(self._cycle, scope, state, source)

    async def wait_suggestion(self) -> str | None:
        await self._suggestion_ready.wait()
        return self.suggestion

    async def wait_finished(self) -> None:
        await self._suggestion_ready.wait()
        for spec in [*self.forks.forks, *([self._spec] if self._spec is not None else [])]:
            await spec.finished.wait()

    @property
    def bash_line(self) -> str:
        return self.runner.bash_line

    def diff(self) -> str:
        spec = self._spec
        return overlay_diff(spec.overlay) if spec is not None and spec.overlay is not None else ""

    async def ignore(self, reason: IgnoreReason = "typed") -> None:
        """The user typed something else (or left): drop the suggestion, abort and discard the fork."""
        t0 = time.perf_counter()
        if self._sugg_rec is not None:
            self._decide_suggestion("ignored")
        spec, self._spec = self._spec, None
        others = [f for f in self.forks.take_all() if f is not spec]
        await self._cancel_cycle()
        for other in others:
            self._close(other, "aborted", reason, abort_started=t0)
        if spec is not None:
            self._close(spec, "aborted", reason, abort_started=t0)
            self._emit("aborted", spec.suggestion)
        self.suggestion = None
        self.candidates = []

    def diverged(self) -> None:
        """The user typed off the suggestion but it is kept (it may still be accepted): note the fork's
        tokens now, so what it spends from here on is recorded as the cost of keeping it."""
        spec = self._spec
        if spec is not None and spec.diverged_at_tokens is None:
            spec.diverged_at_tokens = sum(spec.usage.as_dict().values())

    async def shutdown(self) -> None:
        await self.ignore("shutdown")
        policy.persist(self.policy, self.s, self.opts)

    async def accept(self, prompt: str, t0: float) -> Acceptance:
        """Use the speculation for ``prompt`` (the current suggestion): approve, check, replay, promote
        (the steps: :mod:`speculate.speculation.accept`), and say what the session runs next. Interrupted
        before it was used (Ctrl-C at the question, Esc while it finishes), the speculation is dropped:
        nothing of it lands, and a fork that went live asks nothing more; :attr:`landing` says whether it
        had landed."""
        await self._choose(prompt)
        spec = self._spec
        self.landing = Landing(prompt) if spec is not None and spec.overlay is not None else None
        try:
            return await self._accept(prompt, t0)
        except BaseException:
            if spec is not None and self._spec is spec:
                with trio.CancelScope(shield=True):
                    await self.ignore("stopped")
            raise

    async def _accept(self, prompt: str, t0: float) -> Acceptance:
        from speculate.speculation import accept as step

        self._decide_suggestion("accepted", prompt)
        spec = self._spec
        if spec is not None and spec.overlay is None and spec.finished.is_set():  # it kept nothing: say why
            return await self._drop(spec, "aborted", step.stopped_note(spec.record))
        if spec is None or spec.overlay is None:  # no fork (e.g. it failed to start): a normal turn
            await self.ignore("no_speculation")
            return Acceptance("live")
        assert spec.authorizer is not None
        early: step.Promotion | None = None
        async with spec.authorizer.asking:  # the fork asks nothing itself while this question is open
            spec.authorizer.go_live(self.s.authorizer)  # from now on it asks at the call, as live
            answer = await step.approve(spec, policy=self.s.approve, main=self.s.authorizer)
            if answer != "n":  # nothing of a speculation that will be discarded is shown
                early = step.check(spec)
                if early is None:
                    step.replay(spec, self.s.on_event)
        if answer == "n":
            return await self._drop(spec, "declined", step.DECLINED)
        if early is not None:
            return await self._drop(spec, early.outcome, early.note)
        if not spec.finished.is_set():
            if self.s.cfg.accept_running == "wait":
                await spec.finished.wait()  # the fork goes on under speculation rules; the user waits less
            else:
                await self._cancel_cycle()
                if not spec.record.boundary:
                    spec.stop("interrupted")
        spec.live = None
        rec = spec.record
        rec.time_to_accept_s = t0 - spec.started
        finished_at = spec.finished_at if spec.finished_at is not None else time.perf_counter()
        rec.time_saved_s = max(0.0, min(t0, finished_at) - spec.started)
        if spec.overlay is None:  # discarded while the user waited (a boundary that holds its cause)
            return await self._drop(spec, "aborted", step.stopped_note(rec, shown=True))
        landing = self.landing
        if landing is None or spec.agent is None:  # our bug; checked before promotion touches the project
            raise InternalError(
                f"accepting a speculation with no landing ({landing}) or no agent ({spec.agent})"
            )
        if self.s.cfg.keep_accepted_diff:
            # the upper layer is spent by promotion; off the loop and bounded (a summary past the bound)
            landing.diff = await landing_diff(spec.overlay)
        promotion = step.promote(spec)
        if not promotion.ok:
            return await self._drop(
                spec,
                promotion.outcome,
                promotion.note + ("; nothing of what it showed was applied" if spec.shown else ""),
            )
        landing.promoted, landing.files = True, step.summary_of(rec)
        self.accepted_diff = landing.diff
        self._spec = None
        self._close(spec, "accepted", promotion.note)
        self._emit("accepted", spec.suggestion, time_saved_s=rec.time_saved_s)
        decision = Acceptance(
            "done" if spec.complete else "resume",
            promotion.note,
            rec,
            completed_part(spec.agent.messages[spec.prefix_len :], complete=spec.complete),
            spec.prefix_len,
            # The live run would have ended in the fork's directory: the session's Bash goes on from there.
            spec.agent.ctx.shell_dir.path,
            spec.last_usage,
        )
        if spec.complete:
            self._pipelined_from = spec
        else:
            await self._cancel_cycle()
        return decision

    async def _drop(self, spec: Speculation, outcome: SpecOutcome, note: str) -> Acceptance:
        """The speculation is not used after all: discard it (and a pipelined suggestion built on it); the
        turn runs normally, saying why."""
        if self.landing is not None:
            self.landing.dropped = note
        self._spec = None
        await self._cancel_cycle()
        self._close(spec, outcome, note, saved=False)
        return Acceptance("live", note)

    async def _choose(self, prompt: str) -> None:
        """Top-K: the fork of the candidate the user sent is the speculation; the others are stopped and
        discarded (none was forked for it: accepting runs the turn live)."""
        chosen, others = self.forks.choose(prompt)
        if chosen is None and not others:
            return
        self._spec = chosen
        with trio.CancelScope(shield=True):  # short (a cancelled fork stops at its next checkpoint), and each
            for other in others:  # stopped fork must be closed, its overlay discarded
                other.scope.cancel()
                await other.exited.wait()
                self._close(other, "aborted", "other_candidate")

    def turn_done(self, latency_s: float, spec: Any) -> None:
        """A finished turn (what a right fork saved, or would have: the policy's expected saving)."""
        self.policy.observe_turn(latency_s=latency_s, time_saved_s=spec.time_saved_s if spec else None)

    # -- the cycle ----------------------------------------------------------------------------------
    async def _cycle(self, scope: trio.CancelScope, state: TurnState, source: Speculation | None) -> None:
        # Captured: after an accept, the next cycle replaces these while this one may still be finishing
        # the pipelined suggestion.
        done, ready = self._cycle_done, self._suggestion_ready
        try:
            with scope:
                text = await (self._pipelined(source, state) if source is not None else self._suggest(state))
                if text is None:
                    return
                self.suggestion = text
                self._sugg_shown_at = time.perf_counter()
                ready.set()
                if self.s.cfg.fork:  # without a fork, accepting the suggestion runs a normal turn
                    last = source.last_usage if source is not None else state.last_usage
                    specs = self._decide(state, pipelined=source is not None, context=context_tokens(last))
                    await topk.run_forks(specs, lambda spec: self.runner.run(state, spec))
        finally:
            ready.set()
            done.set()
            if self._spec is None and self._cycle_done is done and self.state not in ("accepted", "aborted"):
                self._emit("idle", None)

    async def _pipelined(self, source: Speculation, state: TurnState) -> str | None:
        await source.next_ready.wait()
        out = source.next
        return None if out is None else self._offer(out, state.turn, pipelined=True)

    async def _suggest(self, state: TurnState) -> str | None:
        turn = state.turn
        reason = suggest.suppression_reason(
            state.messages,
            mode=self.s.cfg.mode,
            last_error=state.last_error,
            pending_ask=self.s.authorizer.pending_ask,
            last_usage=state.last_usage,
            near_limit=state.near_limit,
        )
        if reason:
            self.s.events.write(SuggestionRecord(turn=turn, outcome="suppressed", reason=reason))
            return None
        self._emit("generating", None)
        meter = Meter()
        try:
            with billed_to(meter):
                out = await suggest.generate(
                    self.s.cfg.model, state.key, state.messages, k=self.opts.candidates
                )
        except trio.Cancelled:
            self._cancelled_suggestion(meter, turn, pipelined=False)
            raise
        except ModelError as e:
            self.s.events.write(SuggestionRecord(turn=turn, outcome="suppressed", reason=f"error: {e}"))
            return None
        return self._offer(out, turn, pipelined=False)

    def _offer(self, out: suggest.SuggestionOutcome, turn: int, *, pipelined: bool) -> str | None:
        """Show a generated suggestion (its record waits for the user's decision), or record it filtered."""
        rec = self._suggestion_record(out, turn, pipelined=pipelined)
        if out.text is None:
            rec.outcome, rec.reason = "filtered", out.reason
            self.s.events.write(rec)
            return None
        self._sugg_rec = rec
        self.candidates = out.candidates
        return out.text

    def _decide(self, state: TurnState, *, pipelined: bool, context: int) -> list[Speculation]:
        """The policy's decision per candidate, recorded with its numbers; the forks to run, registered."""
        decisions = self.policy.decide(self.candidates, messages=state.messages, context_tokens=context)
        if self._sugg_rec is not None:
            self._sugg_rec.decisions = decisions
            if not any(d.fork for d in decisions):
                self._sugg_rec.outcome = "abstained"  # shown all the same; the user's choice is added later
        if decisions and not any(d.fork for d in decisions):  # the REPL's toolbar says so, with the numbers
            best = decisions[0]
            self._emit(
                "idle",
                None,
                abstained=True,
                p_accept=best.p_accept,
                expected_saving_s=best.expected_saving_s,
                expected_cost_usd=best.expected_cost_usd,
            )
        specs = [
            self.forks.add(
                Speculation(
                    suggestion=d.text,
                    prefix_len=len(state.messages),
                    turn=state.turn,
                    pipelined=pipelined,
                    rank=d.rank,
                )
            )
            for d in decisions
            if d.fork
        ]
        self._spec = specs[0] if specs else None  # the lowest-ranked fork: the toolbar shows it
        return specs

    # -- helpers ------------------------------------------------------------------------------------
    async def _cancel_cycle(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
        await self._cycle_done.wait()
