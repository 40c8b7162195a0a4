"""A session: one conversation on one project, the main agent, and (optionally) the speculation engine.

This is the surface the REPL and the benchmark drive::

    async with open_session(SessionConfig(project=path, model=model), ask=ask, on_event=cb) as s:
        outcome = await s.submit("fix the bug")      # a normal turn (first turn: no suggestion yet)
        text = await s.wait_suggestion()              # the predicted next prompt, or None
        outcome = await s.submit(text)                # equal to the suggestion: accept the speculation
        s.statistics()

Accepting does what typing the prompt and answering its questions would: a command the fork ran that the
live path would have asked about is put to ``approve`` (one answer for all of them) before anything lands,
or, without it, to ``ask`` question by question as the live path would put it; no (or no one to ask)
discards the speculation and runs the turn normally (:mod:`speculate.speculation.approvals`).

Background work (suggestion, speculation) runs in the engine's own nursery, which the session opens and
closes (:meth:`SpeculationEngine.running`): none of it outlives the session. The engine decides what an
accepted suggestion comes to; the session acts on it (runs the turn, extends the conversation:
:mod:`speculate.session_turn`). Compacting the conversation (by hand, automatically, on a too-long refusal)
is :mod:`speculate.session_compaction`'s part of the class.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

import trio

from overlayfs import recover_project
from overlayfs.state import project_state, tidy
from speculate.agent import Agent
from speculate.agent_types import AgentEvent
from speculate.compaction import Compactor
from speculate.fs import LocalFS, LocalShell
from speculate.hooks import HookRan, HookTranscript
from speculate.models.base import CacheKey, Usage
from speculate.session_turn import SessionTurns, TurnOutcome
from speculate.session_types import AskFn, PermissionMode, SessionConfig, SpecEdits
from speculate.speculation.accept import Landing
from speculate.speculation.approvals import ApproveFn
from speculate.speculation.authorize import MainAuthorizer
from speculate.speculation.engine import SpeculationEngine
from speculate.speculation.events import EventLog, SpecEvent
from speculate.speculation.host import IgnoreReason
from speculate.tempfiles import temp_dir
from speculate.tools import default_tools
from speculate.tools.base import ShellDir, ToolContext
from speculate.transcript import Transcript
from speculate.trust import session_trust
from speculate.types import Message
from speculate.workspace import Workspace, open_workspace


class Session(SessionTurns):
    def __init__(
        self,
        cfg: SessionConfig,
        *,
        ask: AskFn | None,
        on_event: Callable[[AgentEvent | SpecEvent | HookRan], None] | None,
        workspace: Workspace | None = None,
        approve: ApproveFn | None = None,
    ) -> None:
        self.cfg = cfg
        self.project = cfg.project.resolve()
        # Before anything else: finish or undo an acceptance a killed process left here (the REPL has
        # usually done it already and said so; this one finds nothing then).
        self.recovery = recover_project(self.project)
        self.on_event = on_event or (lambda e: None)
        self.trusted = session_trust(cfg.trusted, self.project)
        self.workspace = workspace or Workspace.load(self.project, user=cfg.user_dir, trusted=self.trusted)
        rules = self.workspace.settings
        if cfg.settings_mode and rules.default_mode is not None:
            cfg.mode = cast(PermissionMode, rules.default_mode)
        self.authorizer = MainAuthorizer(
            mode=cfg.mode,
            allow=[*cfg.allow, *rules.allow],
            deny=[*cfg.deny, *rules.deny],
            ask_rules=rules.ask,
            ask=ask,
            root=self.project,
            additional_dirs=[*cfg.additional_dirs, *rules.additional_dirs],
        )
        self.approve = approve
        # A wholly denied tool (a bare "Grep" deny, "mcp__server") is not offered, as in Claude Code: decided
        # once, here, since the tools are part of the cache key.
        self.tools = self.authorizer.gate.offered([*default_tools(), *self.workspace.tools])
        self.key = self._build_key()
        self.session_id = str(uuid.uuid4())
        self.hook_transcript = self._new_hook_transcript()
        self.hooks = self.workspace.hooks(
            shell=LocalShell(self.project, env=cfg.tool_env),
            session_id=self.session_id,
            mode=lambda: self.cfg.mode,
            on_event=self.on_event,
            transcript=self.hook_transcript,
        )
        self.events = EventLog(cfg.events_path, keep=cfg.keep_records)
        self.transcript = Transcript(cfg.transcript_path) if cfg.transcript_path is not None else None
        # Outputs over a tool's limit are saved here; a directory we made is removed with the session. Made
        # after everything that can fail on bad input (a malformed rule), so a failed Session() leaks none.
        self._own_spill = cfg.spill_dir is None
        self.spill_dir = cfg.spill_dir or temp_dir("spill")
        self.ctx = ToolContext(
            fs=LocalFS(self.project),
            shell=LocalShell(self.project, env=cfg.tool_env),
            spill_dir=self.spill_dir,
            # The Bash tool's directory may stay in the additional working directories, as in Claude Code.
            shell_dir=ShellDir(working_dirs=tuple(self.authorizer.gate.additional_dirs)),
        )
        self.authorizer.ctx = self.ctx  # the gate is given the Bash tool's current directory
        self.messages: list[Message] = []
        self.agent = Agent(
            model=cfg.model,
            key=self.key,
            tools=self.tools,
            ctx=self.ctx,
            authorizer=self.authorizer,
            messages=self.messages,
            max_turns=cfg.max_turns,
            on_event=self.on_event,
            hooks=self.hooks,
        )
        self.engine = SpeculationEngine(session=self)
        self.compactor = Compactor(model=cfg.model, window=cfg.context_window, margin=cfg.compact_margin)
        self.turn = 0
        self.last_error = False
        self.outcomes: list[TurnOutcome] = []  # the recent turns (all of them without keep_records)
        self.turns_done = 0
        self.turns_accepted = 0
        self._last_usage: Usage | None = None
        self._logged = 0
        # Called as each turn ends, before the next cycle starts: a study (speculate.study) draws the next
        # turn's arm here and sets ``cfg.speculate`` / ``cfg.fork`` for it.
        self.on_turn_end: Callable[[TurnOutcome], None] | None = None

    # -- what the REPL and the benchmark call ----------------------------------------------------------
    @property
    def suggestion(self) -> str | None:
        return self.engine.suggestion

    @property
    def suggestions(self) -> list[str]:
        """Every candidate shown (top-K; the first is ``suggestion``): sending any of them accepts its fork."""
        return list(self.engine.candidates)

    async def wait_suggestion(self) -> str | None:
        """Wait until the suggestion for the next prompt exists or was suppressed; return it or None."""
        return await self.engine.wait_suggestion()

    async def wait_speculation(self) -> None:
        """Wait until the current speculation has finished (complete or boundary) or there is none."""
        await self.engine.wait_finished()

    async def submit(self, prompt: str) -> TurnOutcome:
        """Run one user turn. A prompt equal to the current suggestion accepts the speculation."""
        t0 = time.perf_counter()
        self.engine.landing = None  # set again if this turn accepts a speculation
        self.turn += 1
        note = await self._auto_compact()
        accept = (
            self.cfg.speculate and self.engine.suggestion is not None and prompt in self.engine.candidates
        )
        if self._reload_instructions() and accept:  # the fork ran under the old system prompt
            accept, note = (
                False,
                "speculation discarded: the instructions files changed since it ran; running normally",
            )
        if accept:
            outcome = await self.act(prompt, t0, await self.engine.accept(prompt, t0), note)
        else:
            await self.engine.ignore("instructions_changed" if note else "typed")
            outcome = await self.run_turn(prompt, t0, note=note)
        self.outcomes.append(outcome)
        self.turns_done += 1
        self.turns_accepted += outcome.accepted
        if (keep := self.cfg.keep_records) is not None and len(self.outcomes) > 2 * keep:
            del self.outcomes[:-keep]  # a long REPL session: the counts above keep the totals
        self.engine.turn_done(outcome.latency_s, outcome.speculation if outcome.accepted else None)
        self._log_turn(outcome)
        if self.on_turn_end is not None:
            self.on_turn_end(outcome)
        if self.cfg.speculate and not outcome.error and not outcome.blocked and not outcome.stopped:
            self.engine.after_turn(self.turn_state(), pipelined=outcome.accepted and outcome.result is None)
        return outcome

    def _build_key(self) -> CacheKey:
        return CacheKey.build(
            model=self.cfg.model_name,
            system=self.workspace.system(),
            tools=[t.schema() for t in self.tools],
            max_tokens=self.cfg.max_tokens,
        )

    def _reload_instructions(self) -> bool:
        """An edited instructions file takes effect on the next turn: a new system prompt, a new key."""
        if not self.workspace.reload_instructions():
            return False
        self.key = self.agent.key = self._build_key()
        return True

    def _log_turn(self, outcome: TurnOutcome) -> None:
        """Append the turn's new messages, usage and timings to the JSONL transcript (if configured)."""
        if self.transcript is None:
            return
        for m in self.messages[self._logged :]:
            self.transcript.message(m, turn=self.turn)
        self._logged = len(self.messages)
        if outcome.result is not None:
            for r in outcome.result.responses:
                self.transcript.usage(r.usage.as_dict(), turn=self.turn, ttft_s=r.ttft_s, total_s=r.total_s)
        self.transcript.timing(
            "turn",
            outcome.latency_s,
            turn=self.turn,
            accepted=outcome.accepted,
            error=outcome.error or None,
            note=outcome.note or None,
        )

    async def dismiss(self, reason: IgnoreReason = "dismissed") -> None:
        """The user waves the suggestion away (Esc, typing something else, Ctrl-C): abort and discard it."""
        await self.engine.ignore(reason)

    def diverged(self) -> None:
        """The user typed off the suggestion, which is kept: what its fork spends from here on is the cost of
        keeping it."""
        self.engine.diverged()

    @property
    def landing(self) -> Landing | None:
        """This turn's accepted speculation, and whether it landed (None: the turn accepted none)."""
        return self.engine.landing

    def set_mode(self, mode: PermissionMode) -> None:
        self.cfg.mode = mode
        self.authorizer.set_mode(mode)

    async def set_speculation(self, on: bool) -> None:
        self.cfg.speculate = on
        if not on:
            await self.engine.ignore()

    async def clear(self) -> None:
        """Forget the conversation. As in Claude Code this ends the session for the hooks (SessionEnd
        ``clear``) and starts another, with a new id and transcript (SessionStart ``clear``)."""
        await self.engine.ignore()
        await self.hooks.session_end("clear")
        self.messages.clear()
        self._logged, self._last_usage = 0, None
        self.turn = 0
        self.session_id = self.hooks.session_id = str(uuid.uuid4())
        self.hook_transcript = self.hooks.transcript = self._new_hook_transcript()
        await self.hooks.session_start("clear")

    def _new_hook_transcript(self) -> HookTranscript | None:
        if not self.workspace.settings.hooks:
            return None  # only hooks read it
        return HookTranscript.for_session(self.project, self.session_id, base=self.cfg.hook_transcript_dir)

    def _remove_spill(self) -> None:
        if self._own_spill:
            shutil.rmtree(self.spill_dir, ignore_errors=True)

    def diff(self) -> str:
        """What the current speculation would change (a unified diff), or ""."""
        return self.engine.diff()

    def accepted_diff(self) -> str:
        """What the last accepted speculation changed (with ``keep_accepted_diff``), or ""."""
        return self.engine.accepted_diff

    def statistics(self) -> dict[str, Any]:
        stats = self.events.statistics()
        stats["turns"] = self.turns_done
        stats["accepted_turns"] = self.turns_accepted
        stats["compactions"] = sum(r.ok for r in self.compactor.records)
        stats["compaction_failures"] = sum(not r.ok for r in self.compactor.records)
        return stats


@asynccontextmanager
async def open_session(
    cfg: SessionConfig,
    *,
    ask: AskFn | None = None,
    on_event: Callable[[AgentEvent | SpecEvent | HookRan], None] | None = None,
    approve: ApproveFn | None = None,
) -> AsyncIterator[Session]:
    """Open the workspace and the session's nursery. An exception from the body (or from opening) comes out
    as itself, not wrapped in the nursery's ExceptionGroup, so callers' ``except`` clauses match.
    ``approve`` is the approval policy on acceptance (default: ``ask``, as the live path would)."""
    with unwrap_single():
        async with (
            open_workspace(
                cfg.project.resolve(),
                mcp=cfg.mcp,
                user=cfg.user_dir,
                trusted=session_trust(cfg.trusted, cfg.project.resolve()),
            ) as ws,
        ):
            s = Session(cfg, ask=ask, on_event=on_event, workspace=ws, approve=approve)
            try:
                async with s.engine.running():  # its cycles end (forks discarded) before the session does
                    await s.hooks.session_start("startup")
                    yield s
            finally:
                with trio.CancelScope(shield=True):
                    await s.hooks.session_end("other")
                if s.hook_transcript is not None:
                    s.hook_transcript.remove_forks()
                if s.transcript is not None:
                    s.transcript.close()
                s._remove_spill()
                tidy(project_state(s.project))  # its state dir, if nothing is pending there


@contextmanager
def unwrap_single() -> Iterator[None]:
    """Re-raise a group holding exactly one exception (nested or not) as that exception."""
    try:
        yield
    except BaseExceptionGroup as eg:
        inner: BaseException = eg
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if isinstance(inner, BaseExceptionGroup):
            raise
        raise inner from eg


# The types a session is made with live below it (speculate.session_types); callers import them from here.
__all__ = ["AskFn", "PermissionMode", "Session", "SessionConfig", "SpecEdits", "TurnOutcome", "open_session"]
