"""Long sessions: the conversation is replaced by a model-written summary before it outgrows the window.

Seed 004's rule: compact when the context reaches ``window - 13,000`` tokens. The summary is one request on
the session's own cache key (the conversation plus :data:`COMPACT_INSTRUCTION`), so it reads the cache the
last turn wrote. The session then continues from one user message holding the summary; the next prompt
joins that message. After :data:`MAX_FAILURES` consecutive failures (the API rejects a conversation that is
already too large) the circuit breaker opens: no more automatic tries, and the session says so. ``/compact``
(:meth:`Compactor.compact` with ``force``) runs it on demand, breaker or not.

Only the session's main conversation compacts, between turns, and *reactively*: a request the API refuses
with "prompt is too long" (a turn whose tool results outgrew the window) compacts once and is retried
(:meth:`speculate.session.Session.run_turn`). Such a conversation cannot be sent whole even to be
summarised, so the summary request sees a copy cut to :func:`shrunk` (its largest blocks first). A
speculative fork never compacts: the engine suppresses speculation whose fork would cross the threshold
(suppression reason ``context_limit``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from speculate.errors import SpeculateError
from speculate.models.base import CacheKey, Done, Model, ModelError, ModelResponse, Usage
from speculate.types import Message, text_of, user

COMPACT_MARGIN = 13_000  # tokens below the window where automatic compaction starts (seed 004)
SHRUNK_BLOCK = 2_000  # characters a block keeps when a conversation is cut down to be summarised
CHARS_PER_TOKEN = 4  # a conservative estimate, for cutting to a token budget
MAX_FAILURES = 3
DEFAULT_WINDOW = 200_000
COMPACT_INSTRUCTION = (
    "[COMPACTION] Your task is to create a detailed summary of the conversation so far, so that the work can "
    "continue from the summary alone. Cover: the user's requests in order, the files read and changed (with "
    "paths), the decisions taken and why, errors met and how they were fixed, and what is still to do. Do not "
    "call tools. Answer with the summary only."
)
CONTINUATION = (
    "This session is being continued from a previous conversation that ran out of context. The summary below "
    "covers the earlier portion of the conversation.\n\n{summary}"
)


class CompactionFailed(SpeculateError):
    """The summary request failed or returned nothing; the conversation is unchanged."""


def too_long(error: BaseException) -> bool:
    """Is this the API refusing a request over the context window?"""
    return "prompt is too long" in str(error).lower()


def shrunk(messages: Sequence[Message], budget_chars: int) -> list[Message]:
    """A copy of ``messages`` whose text blocks and tool results add up to at most ``budget_chars``
    characters where cutting can get there: the largest first, each to :data:`SHRUNK_BLOCK` characters
    and a note. The originals are not changed."""
    out = copy.deepcopy(list(messages))
    spots: list[tuple[int, dict[str, Any], str]] = []  # (size, holder, key) of every long text
    for m in out:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "text":
                spots.append((len(b["text"]), b, "text"))
            elif b.get("type") == "tool_result":
                if isinstance(b.get("content"), str):
                    spots.append((len(b["content"]), b, "content"))
                else:
                    spots += [
                        (len(x.get("text", "")), x, "text")
                        for x in b.get("content") or []
                        if x.get("type") == "text"
                    ]
    total = sum(size for size, _, _ in spots)
    for size, holder, key in sorted(spots, key=lambda s: -s[0]):
        if total <= budget_chars or size <= SHRUNK_BLOCK:
            break
        holder[key] = (
            holder[key][:SHRUNK_BLOCK] + f"\n[cut from {size:,} characters to summarise a "
            "conversation over the context window]"
        )
        total -= size - len(holder[key])
    return out


@dataclass
class CompactionRecord:
    turn: int
    trigger: str  # auto | manual
    tokens_before: int  # context size the decision saw (0 when unknown, for /compact)
    messages_before: int
    ok: bool
    error: str = ""
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0


def context_tokens(usage: Usage | None) -> int:
    """The conversation's size after a response: everything it read plus what it wrote."""
    return 0 if usage is None else usage.total_input + usage.output_tokens


@dataclass(kw_only=True)
class Compactor:
    model: Model
    window: int = DEFAULT_WINDOW
    margin: int = COMPACT_MARGIN
    failures: int = 0  # consecutive
    records: list[CompactionRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.margin >= self.window:
            raise ValueError(
                f"compaction margin {self.margin} must be below the context window {self.window}"
            )

    @property
    def threshold(self) -> int:
        return self.window - self.margin

    @property
    def tripped(self) -> bool:
        """The circuit breaker: automatic compaction has failed MAX_FAILURES times in a row."""
        return self.failures >= MAX_FAILURES

    def needed(self, tokens: int) -> bool:
        return tokens >= self.threshold and not self.tripped

    def would_cross(self, tokens: int, headroom: int) -> bool:
        """Would a fork that adds up to ``headroom`` tokens to a ``tokens``-sized context cross the threshold?"""
        return tokens > 0 and tokens + headroom >= self.threshold

    async def compact(
        self,
        key: CacheKey,
        messages: list[Message],
        *,
        turn: int,
        trigger: str = "auto",
        tokens: int = 0,
        instructions: str = "",
        shrink: bool = False,
    ) -> CompactionRecord:
        """Summarise ``messages`` and replace them, in place, by the continuation message (``instructions``:
        the user's own, ``/compact TEXT`` in Claude Code, added to the request). ``shrink``: the conversation
        is over the window; the summary request sees it cut to half the window (:func:`shrunk`).

        Raises CompactionFailed (after counting the failure) when the model call fails or is empty.
        """
        if not any(m["role"] == "assistant" for m in messages):
            raise CompactionFailed("nothing to compact: the conversation has no answer yet")  # not a failure
        rec = CompactionRecord(
            turn=turn, trigger=trigger, tokens_before=tokens, messages_before=len(messages), ok=False
        )
        self.records.append(rec)
        t0 = time.perf_counter()
        try:
            seen = shrunk(messages, self.window * CHARS_PER_TOKEN // 2) if shrink else messages
            resp = await _summary(self.model, key, seen, instructions)
            rec.usage = resp.usage
            summary = text_of(resp.message).strip()
            if not summary:
                raise CompactionFailed("the summary came back empty")
        except (ModelError, CompactionFailed) as e:
            self.failures += 1
            rec.error = str(e)
            rec.duration_s = time.perf_counter() - t0
            raise CompactionFailed(f"compaction failed ({self.failures} in a row): {e}") from None
        self.failures = 0
        rec.ok, rec.duration_s = True, time.perf_counter() - t0
        messages[:] = [user(CONTINUATION.format(summary=summary))]
        return rec


async def _summary(
    model: Model, key: CacheKey, messages: Sequence[Message], instructions: str = ""
) -> ModelResponse:
    ask = COMPACT_INSTRUCTION + (
        f"\n\nAdditional instructions from the user: {instructions}" if instructions else ""
    )
    req: list[Message]
    if messages and messages[-1]["role"] == "user":  # an interrupted turn: the instruction joins it
        req = [*messages[:-1], {"role": "user", "content": [*messages[-1]["content"], *user(ask)["content"]]}]
    else:
        req = [*messages, user(ask)]
    async with aclosing(model.stream(key, req)) as stream:
        async for update in stream:
            if isinstance(update, Done):
                return update.response
    raise ModelError("the summary stream ended without a response")
