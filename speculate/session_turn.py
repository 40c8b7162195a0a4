"""A session's turns: what one gives back (:class:`TurnOutcome`), a normal turn (:meth:`SessionTurns.run_turn`,
or its resumption from promoted messages), and acting on the speculation engine's decision when a suggestion
is accepted (:meth:`SessionTurns.act`). The engine decides and promotes; only the session runs a turn and
changes its conversation. :class:`~speculate.session.Session` is one of these."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

from speculate.agent import Agent
from speculate.agent_types import MaxTurnsReached, TurnResult
from speculate.compaction import CompactionFailed, too_long
from speculate.errors import InternalError
from speculate.hooks import PromptBlocked
from speculate.models.base import ModelError
from speculate.session_compaction import SessionCompaction
from speculate.speculation.accept import Acceptance
from speculate.speculation.authorize import MainAuthorizer
from speculate.speculation.events import SpeculationRecord
from speculate.speculation.host import TurnState
from speculate.tools.base import ToolContext
from speculate.types import text_of


@dataclass
class TurnOutcome:
    prompt: str
    text: str
    latency_s: float  # submit -> final answer, as the user perceives it
    accepted: bool  # the speculation was used
    result: TurnResult | None  # the normal loop's part (None when the speculation answered it all)
    speculation: SpeculationRecord | None = None
    note: str = ""  # e.g. why an accepted speculation was discarded (conflict)
    error: str = ""  # the model failed (retries exhausted)
    blocked: str = ""  # a UserPromptSubmit hook refused the prompt (its reason); nothing was sent
    stopped: str = ""  # a hook said continue: false and the turn ended there (what it said)


class SessionTurns(SessionCompaction):
    """The turn side of a session; :class:`~speculate.session.Session` sets these in its ``__init__``."""

    agent: Agent
    authorizer: MainAuthorizer
    ctx: ToolContext
    last_error: bool

    def turn_state(self) -> TurnState:
        """What the engine's next cycle starts from (the conversation copied: the forks start from it)."""
        return TurnState(
            messages=copy.deepcopy(self.messages),
            turn=self.turn,
            key=self.key,
            shell_dir=self.ctx.shell_dir,  # the session's own: a fork copies it when it starts
            last_usage=self._last_usage,
            last_error=self.last_error,
            near_limit=self.near_context_limit(),
        )

    async def act(self, prompt: str, t0: float, decision: Acceptance, note: str = "") -> TurnOutcome:
        """Run what the engine decided on accepting the suggestion ``prompt``: nothing more (the promoted
        messages are the turn), the rest of the turn live from them, or the prompt as a normal turn."""
        note = "; ".join(n for n in (note, decision.note) if n)
        if decision.action == "live":
            try:
                return await self.run_turn(prompt, t0, note=note)
            finally:
                self.authorizer.carried = []  # answers carried from a declined acceptance: this turn's only
        if (
            len(self.messages) != decision.prefix_len
        ):  # our bug, never the user's: it must not vanish under -O
            raise InternalError(
                f"the main conversation moved under the speculation ({len(self.messages)} "
                f"messages, the fork started at {decision.prefix_len})"
            )
        self.messages.extend(decision.messages)
        # The live run would have ended in the fork's directory: the session's Bash goes on from there.
        self.ctx.shell_dir.path = decision.shell_dir
        if decision.action == "resume":
            return await self.run_turn(prompt, t0, resume=True, spec=decision.record, note=note)
        self._last_usage = decision.last_usage or self._last_usage
        last = self.messages[-1]
        return TurnOutcome(
            prompt,
            text_of(last) if last["role"] == "assistant" else "",
            time.perf_counter() - t0,
            True,
            None,
            decision.record,
            note,
        )

    async def run_turn(
        self,
        prompt: str,
        t0: float,
        *,
        resume: bool = False,
        note: str = "",
        spec: SpeculationRecord | None = None,
    ) -> TurnOutcome:
        """A normal turn: ``resume`` goes on from promoted speculative messages. Model errors and the turn's
        limit end it with ``error`` set."""
        before = len(self.messages)
        try:
            try:
                result = await (self.agent.resume() if resume else self.agent.run(prompt))
            except ModelError as e:
                if not too_long(e) or not (self.cfg.auto_compact and self.cfg.reactive_compact):
                    raise
                note = "; ".join(n for n in (note, await self._compact_reactively(e)) if n)
                result = await self.agent.resume()  # once: the same turn, on the summary
        except PromptBlocked as e:
            return TurnOutcome(
                prompt, "", time.perf_counter() - t0, spec is not None, None, spec, note, blocked=str(e)
            )
        except (
            ModelError,
            CompactionFailed,
            MaxTurnsReached,
        ) as e:  # the turn ends with a message; the session goes on
            self.last_error = True
            what = f"the turn stopped at its limit: {e}" if isinstance(e, MaxTurnsReached) else str(e)
            if too_long(e) and len(self.messages) >= before and not resume:
                # Never a poisoned session: what this turn added would make every later request too long too.
                del self.messages[before:]
                self.agent.repair()
                what += "; this turn was taken back out of the conversation, so the next prompt starts from before it"
            return TurnOutcome(
                prompt, "", time.perf_counter() - t0, spec is not None, None, spec, note, error=what
            )
        self.last_error = False
        if result.responses:
            self._last_usage = result.responses[-1].usage
        return TurnOutcome(
            prompt,
            result.text,
            time.perf_counter() - t0,
            spec is not None,
            result,
            spec,
            note,
            stopped=result.hook_stopped,
        )
