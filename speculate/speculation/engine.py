"""The speculation engine: after each turn, suggest the next prompt and run it on an overlay.

One *cycle* per completed main turn runs in the session's nursery under its own cancel scope:
suggestion (or a pipelined one) → fork on a fresh overlay → stop at complete or a boundary → (complete)
pipelined next suggestion. ``accept`` asks about the calls the fork ran that the live path would have
asked about, then promotes and injects; ``ignore`` cancels the cycle and discards the overlay. Nothing but
``accept`` writes the real tree. See docs/speculation.md for the state machine.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any

import trio

from speculate.agent import Agent
from speculate.agent_types import (
    AgentEvent,
    BoundaryReached,
    MaxTurnsReached,
    ResponseDone,
    ToolFinished,
    ToolStarted,
)
from speculate.hooks import PromptBlocked
from speculate.models.base import ModelError
from speculate.models.billing import Meter, billed_to
from speculate.models.profiles import cost_usd
from speculate.speculation import suggest
from speculate.speculation.accept import Landing
from speculate.speculation.approvals import Approvals
from speculate.speculation.authorize import SpecAuthorizer
from speculate.speculation.effects import renames
from speculate.speculation.events import SpecEvent, SpecOutcome, State, SuggestionOutcome, SuggestionRecord
from speculate.speculation.fork import Speculation
from speculate.speculation.fork_fs import BoundedWrites, fork_overlay
from speculate.speculation.guard import Protection
from speculate.speculation.host import Host, IgnoreReason
from speculate.speculation.trim import completed_part
from speculate.tools.base import ToolContext
from speculate.types import Message, text_of

if TYPE_CHECKING:
    from speculate.session import TurnOutcome


class SpeculationEngine:
    def __init__(self, *, session: Host, nursery: trio.Nursery) -> None:
        self.s = session
        self.nursery = nursery
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
        self.state: State = "idle"
        self.bash_line = ""  # how speculative Bash runs here (or why it does not), set by the first fork
        self.landing: Landing | None = None  # this turn's accepted speculation: did it land (accept.Landing)
        self.accepted_diff = ""  # what the last speculation that landed changed (keep_accepted_diff)

    # -- driven by the session -----------------------------------------------------------------------
    def after_turn(self, *, pipelined: bool) -> None:
        """Start the next cycle (the previous one is over: accepted or ignored)."""
        self.suggestion = None
        self._suggestion_ready = trio.Event()
        self._cycle_done = trio.Event()
        source = self._pipelined_from if pipelined else None
        self._pipelined_from = None
        snapshot = copy.deepcopy(self.s.messages)
        scope = self._scope = trio.CancelScope()
        self.nursery.start_soon(self._cycle, scope, snapshot, self.s.turn, source)

    async def wait_suggestion(self) -> str | None:
        await self._suggestion_ready.wait()
        return self.suggestion

    async def wait_finished(self) -> None:
        await self._suggestion_ready.wait()
        if self._spec is not None:
            await self._spec.finished.wait()

    def diff(self) -> str:
        spec = self._spec
        return spec.overlay.diff() if spec is not None and spec.overlay is not None else ""

    async def ignore(self, reason: IgnoreReason = "typed") -> None:
        """The user typed something else (or left): drop the suggestion, abort and discard the fork."""
        t0 = time.perf_counter()
        if self._sugg_rec is not None:
            self._decide_suggestion("ignored")
        spec, self._spec = self._spec, None
        await self._cancel_cycle()
        if spec is not None:
            self._close(spec, "aborted", reason, abort_started=t0)
            self._emit("aborted", spec.suggestion)
        self.suggestion = None

    def diverged(self) -> None:
        """The user typed off the suggestion but it is kept (it may still be accepted): note the fork's
        tokens now, so what it spends from here on is recorded as the cost of keeping it."""
        spec = self._spec
        if spec is not None and spec.diverged_at_tokens is None:
            spec.diverged_at_tokens = sum(spec.usage.as_dict().values())

    async def shutdown(self) -> None:
        await self.ignore("shutdown")

    async def accept(self, prompt: str, t0: float) -> TurnOutcome:
        """Use the speculation for ``prompt`` (the current suggestion): approve, check, replay, promote,
        inject (the steps: :mod:`speculate.speculation.accept`). Interrupted before it was used (Ctrl-C at the
        question, Esc while it finishes), the speculation is dropped: nothing of it lands, and a fork
        that went live asks nothing more; :attr:`landing` says whether it had landed."""
        spec = self._spec
        self.landing = Landing(prompt) if spec is not None and spec.overlay is not None else None
        try:
            return await self._accept(prompt, t0)
        except BaseException:
            if spec is not None and self._spec is spec:
                with trio.CancelScope(shield=True):
                    await self.ignore("stopped")
            raise

    async def _accept(self, prompt: str, t0: float) -> TurnOutcome:
        from speculate.session import TurnOutcome
        from speculate.speculation import accept as step

        self._decide_suggestion("accepted")
        spec = self._spec
        if spec is None or spec.overlay is None:  # no fork (e.g. it failed to start): a normal turn
            await self.ignore("no_speculation")
            return await self.s.run_turn(prompt, t0)
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
            return await self._drop(spec, prompt, t0, "declined", step.DECLINED)
        if early is not None:
            return await self._drop(spec, prompt, t0, early.outcome, early.note)
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
            return await self._drop(spec, prompt, t0, "aborted", "speculation discarded: it stopped at a "
                                    f"boundary ({rec.boundary}); nothing of what it showed was applied; "
                                    "running normally")
        landing = self.landing
        assert landing is not None
        if self.s.cfg.keep_accepted_diff:
            landing.diff = spec.overlay.diff()  # the upper layer is spent by promotion
        promotion = step.promote(spec)
        if not promotion.ok:
            return await self._drop(spec, prompt, t0, promotion.outcome, promotion.note + (
                "; nothing of what it showed was applied" if spec.shown else ""))
        landing.promoted, landing.files = True, step.summary_of(rec)
        self.accepted_diff = landing.diff
        assert spec.agent is not None
        assert len(self.s.messages) == spec.prefix_len, "main conversation moved under the speculation"
        self.s.messages.extend(completed_part(spec.agent.messages[spec.prefix_len:], complete=spec.complete))
        self._spec = None
        self._close(spec, "accepted", promotion.note)
        self._emit("accepted", spec.suggestion, time_saved_s=rec.time_saved_s)
        if spec.complete:
            self._pipelined_from = spec
            self.s.set_agent_last_usage(spec.last_usage or self.s.agent_last_usage())
            last = self.s.messages[-1]
            return TurnOutcome(prompt, text_of(last) if last["role"] == "assistant" else "",
                               time.perf_counter() - t0, True, None, rec, promotion.note)
        await self._cancel_cycle()
        return await self.s.run_turn(prompt, t0, resume=True, spec=rec, note=promotion.note)

    async def _drop(self, spec: Speculation, prompt: str, t0: float, outcome: SpecOutcome, note: str
                    ) -> TurnOutcome:
        """The speculation is not used after all: discard it (and a pipelined suggestion built on it) and run
        the turn normally, saying why."""
        if self.landing is not None:
            self.landing.dropped = note
        self._spec = None
        await self._cancel_cycle()
        self._close(spec, outcome, note, saved=False)
        return await self.s.run_turn(prompt, t0, note=note)

    # -- the cycle ----------------------------------------------------------------------------------
    async def _cycle(self, scope: trio.CancelScope, snapshot: list[Message], turn: int,
                     source: Speculation | None) -> None:
        # Captured: after an accept, the next cycle replaces these while this one may still be finishing
        # the pipelined suggestion.
        done, ready = self._cycle_done, self._suggestion_ready
        try:
            with scope:
                text = await (self._pipelined(source) if source is not None else self._suggest(snapshot, turn))
                if text is None:
                    return
                self.suggestion = text
                self._sugg_shown_at = time.perf_counter()
                ready.set()
                if self.s.cfg.fork:  # without a fork, accepting the suggestion runs a normal turn
                    await self._speculate(snapshot, text, turn, pipelined=source is not None)
        finally:
            ready.set()
            done.set()
            if self._spec is None and self._cycle_done is done and self.state not in ("accepted", "aborted"):
                self._emit("idle", None)

    async def _pipelined(self, source: Speculation) -> str | None:
        await source.next_ready.wait()
        out = source.next
        return None if out is None else self._offer(out, self.s.turn, pipelined=True)

    async def _suggest(self, snapshot: list[Message], turn: int) -> str | None:
        last = self.s.agent_last_usage()
        reason = suggest.suppression_reason(snapshot, mode=self.s.cfg.mode, last_error=self.s.last_error,
                                            pending_ask=self.s.authorizer.pending_ask, last_usage=last,
                                            near_limit=self.s.near_context_limit())
        if reason:
            self.s.events.write(SuggestionRecord(turn=turn, outcome="suppressed", reason=reason))
            return None
        self._emit("generating", None)
        meter = Meter()
        try:
            with billed_to(meter):
                out = await suggest.generate(self.s.cfg.model, self.s.key, snapshot)
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
        return out.text

    def _suggestion_record(self, out: suggest.SuggestionOutcome, turn: int, *, pipelined: bool
                           ) -> SuggestionRecord:
        return SuggestionRecord(turn=turn, text=out.text or "", generation_s=out.duration_s,
                                pipelined=pipelined, tokens=out.usage.as_dict(),
                                cost_usd=cost_usd(self.s.cfg.model_name, out.usage))

    async def _speculate(self, snapshot: list[Message], text: str, turn: int, *, pipelined: bool) -> None:
        spec = self._spec = Speculation(suggestion=text, prefix_len=len(snapshot), turn=turn,
                                        pipelined=pipelined)
        t = time.perf_counter()
        # Bounded: its Bash commands and its file tools write the same upper layer, on a filesystem of the
        # sandbox's size (a write past it fails, and the fork stops at `resource`).
        spec.overlay = fork_overlay(self.s.project, self.s.cfg.sandbox_limits)
        spec.record.overlay_create_s = time.perf_counter() - t
        protection = Protection(self.s.workspace.settings.protected_paths)
        shell, sandboxed, backend = self._shell_for(spec.overlay, protection)
        spec.record.overlay_backend = backend
        spec.record.bash = self.bash_line
        # The user's hooks are untrusted code with side effects, as Bash is: in the sandbox against the
        # overlay, or (no sandbox) a boundary wherever one would run.
        hooks = self.s.workspace.hooks(
            shell=shell, session_id=self.s.session_id, mode=lambda: self.s.cfg.mode, sandboxed=sandboxed,
            boundary=None if sandboxed else f"hooks run in a speculation only in its sandbox: {self.bash_line}",
            on_event=spec.hook_ran,
            transcript=self.s.hook_transcript.fork() if self.s.hook_transcript is not None else None)
        spec.approvals = Approvals(spec.overlay)
        authorizer = spec.authorizer = SpecAuthorizer(
            mode=self.s.cfg.mode, allow=self.s.authorizer.allow, deny=self.s.authorizer.deny,
            ask_rules=self.s.authorizer.ask_rules, sandboxed_bash=sandboxed, root=self.s.project,
            bash_off=self.bash_line, hook_stop=hooks.stops_call, protection=protection, fs=spec.overlay,
            approvals=spec.approvals)
        spec.agent = Agent(model=self.s.cfg.model, key=self.s.key, tools=self.s.tools,
                           ctx=ToolContext(fs=BoundedWrites(spec.overlay), shell=shell, spill_dir=self.s.spill_dir),
                           authorizer=authorizer, messages=copy.deepcopy(snapshot),
                           max_turns=self.s.cfg.spec_max_turns, max_messages=self.s.cfg.spec_max_messages,
                           on_event=lambda e: self._fork_event(spec, e), repair_on_interrupt=False, hooks=hooks)
        spec.record.fork_start_s = time.perf_counter() - spec.started
        self._emit("speculating", text, tools_run=0, elapsed_s=0.0)
        try:
            with billed_to(spec.meter):
                await spec.agent.run(text)
            spec.stop("complete")
        except BoundaryReached as b:
            spec.stop(b.kind, b.detail)
            # Over its bounds, or holding what made the boundary (a protected path or special file written by
            # a command, a hook that failed): nothing of it may be promoted; the disk is freed at once.
            if b.kind == "resource" or b.discard:
                spec.overlay.discard()
                spec.overlay = None
        except PromptBlocked as e:  # as in the main loop, the prompt is refused; accepting runs it normally
            spec.stop("hook", f"UserPromptSubmit hook refused it: {e}")
        except MaxTurnsReached as e:
            spec.stop(e.kind, str(e))
        except ModelError as e:
            spec.stop("error", str(e))
        if spec.overlay is not None and len(spec.agent.messages) == spec.prefix_len:
            spec.overlay.discard()  # stopped before its prompt was added: nothing to promote or inject
            spec.overlay = None
        spec.finished_at = time.perf_counter()
        spec.record.completed = True
        if spec.overlay is not None:  # renames need the real tree before promotion: learn them now, not on Tab
            ov = spec.overlay
            with trio.CancelScope(shield=True):  # short; and what follows must run
                spec.renames = await trio.to_thread.run_sync(lambda: renames(ov.changes(), ov.lower, ov.upper))
        spec.finished.set()
        approvals = len(spec.approvals.pending) if spec.overlay is not None else 0
        if spec.complete:
            self._emit("ready", text, tools_run=spec.tools_run, elapsed_s=spec.finished_at - spec.started,
                       approvals=approvals)
            try:
                with billed_to(spec.next_meter):
                    spec.next = await suggest.generate(self.s.cfg.model, spec.agent.key, spec.agent.messages)
            except ModelError:
                spec.next = None
            finally:
                spec.next_ready.set()
        else:
            spec.next_ready.set()
            self._emit("boundary", text, boundary=spec.record.boundary, detail=spec.record.boundary_detail,
                       tools_run=spec.tools_run, elapsed_s=spec.finished_at - spec.started, approvals=approvals)

    # -- helpers ------------------------------------------------------------------------------------
    def _shell_for(self, overlay: Any, protection: Protection) -> tuple[Any, bool, str]:
        from speculate.speculation.sandbox_shell import NoShell, SandboxShell, bash_sandbox

        box = bash_sandbox(self.s.cfg.overlay_backend)
        self.bash_line = box.line
        if box.backend is None:
            return NoShell(box.line), False, "pure"
        shell = SandboxShell(overlay, box.backend, limits=self.s.cfg.sandbox_limits, protection=protection,
                             env=self.s.cfg.tool_env, passed_env=self.s.workspace.settings.env)
        return shell, True, box.backend

    def _fork_event(self, spec: Speculation, e: AgentEvent) -> None:
        if not isinstance(e, ToolStarted):
            spec.shown.append(e)
            if spec.live is not None:
                spec.live(e)
        if isinstance(e, ResponseDone):
            spec.usage = spec.usage.add(e.response.usage)
            spec.last_usage = e.response.usage
        elif isinstance(e, ToolFinished):
            if spec.approvals is not None and spec.overlay is not None:
                spec.approvals.finish(e.id)
            spec.tools_run += 1
            self._emit("speculating", spec.suggestion, tools_run=spec.tools_run,
                       elapsed_s=time.perf_counter() - spec.started)

    async def _cancel_cycle(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
        await self._cycle_done.wait()

    def _decide_suggestion(self, outcome: SuggestionOutcome) -> None:
        rec, self._sugg_rec = self._sugg_rec, None
        if rec is None:
            return
        rec.outcome = outcome
        rec.time_to_decision_s = time.perf_counter() - self._sugg_shown_at
        self.s.events.write(rec)

    def _close(self, spec: Speculation, outcome: SpecOutcome, reason: str, *, saved: bool = True,
               abort_started: float | None = None) -> None:
        rec = spec.record
        rec.outcome, rec.reason = outcome, reason
        end = spec.finished_at if spec.finished_at is not None else time.perf_counter()
        rec.duration_s = end - spec.started
        rec.tools_run = spec.tools_run
        usage = spec.usage.add(spec.meter.usage)  # a request cut mid-stream is billed too
        rec.tokens = usage.as_dict()
        if spec.diverged_at_tokens is not None:
            rec.tokens_after_divergence = sum(rec.tokens.values()) - spec.diverged_at_tokens
        rec.cost_usd = cost_usd(self.s.cfg.model_name, usage)
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
            self.s.events.write(SuggestionRecord(
                turn=turn, outcome="discarded", reason="cancelled mid-request", pipelined=pipelined,
                tokens=meter.usage.as_dict(), cost_usd=cost_usd(self.s.cfg.model_name, meter.usage)))

    def _emit(self, state: State, suggestion: str | None, **detail: Any) -> None:
        self.state = state
        self.s.on_event(SpecEvent(state, suggestion, detail))
