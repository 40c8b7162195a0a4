"""A session's context window: compacting its conversation by hand (``/compact``), before a turn that
reached the threshold, and when the API refused a request as too long; and the last usage the threshold
is read from. :class:`~speculate.session.Session` is one of these."""

from __future__ import annotations

from speculate.compaction import CompactionFailed, CompactionRecord, Compactor, context_tokens
from speculate.hooks import CompactBlocked, HookRunner
from speculate.models.base import CacheKey, ModelError, Usage
from speculate.session_types import SessionConfig
from speculate.speculation.engine import SpeculationEngine
from speculate.transcript import Transcript
from speculate.types import Message


class SessionCompaction:
    """The compaction side of a session; :class:`~speculate.session.Session` sets these in its ``__init__``."""

    cfg: SessionConfig
    engine: SpeculationEngine
    hooks: HookRunner
    compactor: Compactor
    key: CacheKey
    messages: list[Message]
    transcript: Transcript | None
    turn: int
    _last_usage: Usage | None
    _logged: int

    async def compact(
        self, *, trigger: str = "manual", instructions: str = "", shrink: bool = False
    ) -> CompactionRecord:
        """Summarise the conversation now (``/compact``; raises CompactionFailed). The speculation on the old
        prefix is dropped; the next suggestion and fork share the new prefix's cache. The PreCompact hooks
        run first (exit 2 refuses: not a failure of the summary), the SessionStart ``compact`` ones after."""
        await self.engine.ignore("compacted")
        try:
            # Claude Code's PreCompact triggers are "manual" and "auto": a compaction the API's refusal forced
            # is an automatic one to a hook.
            await self.hooks.pre_compact("auto" if trigger == "reactive" else trigger, instructions)
        except CompactBlocked as e:
            raise CompactionFailed(f"compaction blocked by a PreCompact hook: {e}") from None
        rec = await self.compactor.compact(
            self.key,
            self.messages,
            turn=self.turn,
            trigger=trigger,
            tokens=context_tokens(self._last_usage),
            instructions=instructions,
            shrink=shrink,
        )
        await self.hooks.session_start("compact")
        self._last_usage, self._logged = None, 0  # the transcript logs the continuation message
        if self.transcript is not None:
            self.transcript.write(
                "compaction",
                turn=self.turn,
                trigger=trigger,
                tokens_before=rec.tokens_before,
                messages_before=rec.messages_before,
                usage=rec.usage.as_dict(),
            )
        return rec

    async def _compact_reactively(self, error: ModelError) -> str:
        """A request over the context window: summarise the conversation (cut down to be summarisable) and
        go on from the summary; raises CompactionFailed (naming the refusal) when that fails too."""
        try:
            rec = await self.compact(trigger="reactive", shrink=True)
        except CompactionFailed as e:
            raise CompactionFailed(f"{error}; compacting it failed too: {e}") from None
        return f"the request was over the context window: conversation compacted ({rec.messages_before} messages -> a summary) and retried"

    async def _auto_compact(self) -> str:
        """Compact before a turn when the context reached the threshold; a note for the outcome, or ""."""
        tokens = context_tokens(self._last_usage)
        if not self.cfg.auto_compact or not self.compactor.needed(tokens):
            return ""
        try:
            rec = await self.compact(trigger="auto")
        except CompactionFailed as e:
            if self.compactor.tripped:
                return f"{e}; automatic compaction is off for this session (/compact tries again)"
            return str(e)
        return f"conversation compacted at {tokens} tokens ({rec.messages_before} messages -> a summary)"

    def near_context_limit(self) -> bool:
        """Would a speculative turn cross the compaction threshold? (Then no speculation: a fork never compacts.)"""
        return self.compactor.would_cross(context_tokens(self._last_usage), self.cfg.fork_headroom)

    def agent_last_usage(self) -> Usage | None:
        """Usage of the last response of the last turn (the cold-cache check reads it; an accepted complete
        speculation's last response stands for its turn's)."""
        return self._last_usage
