"""Prompt suggestion: a forked request on the parent's exact cache key that predicts the next prompt."""

from __future__ import annotations

import time
from contextlib import aclosing
from dataclasses import dataclass, field

from speculate.models.base import CacheKey, Done, Model, Usage
from speculate.prompts import suggestion_instruction
from speculate.speculation import filters
from speculate.types import Message, text_of, tool_uses, user

# Short output cap: a suggestion is at most 12 words (top-K: K times that). CacheKey.request keeps
# max_tokens when thinking is on, so the cap never changes the thinking budget (which would break the cache).
SUGGESTION_MAX_TOKENS = 64
# A parent turn that added more uncached tokens than this makes a fork pay for them again: suppress.
COLD_CACHE_TOKENS = 10_000


@dataclass
class SuggestionOutcome:
    text: str | None  # None: suppressed or filtered; else the first candidate
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    refused_tool_calls: int = 0
    texts: list[str] = field(default_factory=list)  # every candidate that passed the filters, first = text

    @property
    def candidates(self) -> list[str]:
        return self.texts or ([self.text] if self.text is not None else [])


def suppression_reason(
    messages: list[Message],
    *,
    mode: str,
    last_error: bool,
    pending_ask: bool,
    last_usage: Usage | None,
    near_limit: bool = False,
) -> str:
    """Why no suggestion should be generated now ("" if one should)."""
    if sum(m["role"] == "assistant" for m in messages) < 2:
        return "first_turn"
    if last_error:
        return "api_error"
    if pending_ask:
        return "permission_pending"
    if mode == "plan":
        return "plan_mode"
    if near_limit:  # the fork would cross the compaction threshold, and a fork never compacts
        return "context_limit"
    if (
        last_usage is not None
        and last_usage.input_tokens + last_usage.cache_creation_input_tokens > COLD_CACHE_TOKENS
    ):
        return "cold_cache"
    return ""


async def generate(model: Model, key: CacheKey, messages: list[Message], *, k: int = 1) -> SuggestionOutcome:
    """Ask the model for the next prompt (``k`` > 1: up to k alternatives, one per line, each filtered);
    tools stay in the request (removing them breaks the cache) and any tool call in the answer is refused."""
    t0 = time.perf_counter()
    req: list[Message] = [*messages, user(suggestion_instruction(k))]
    resp = None
    async with aclosing(model.stream(key, req, max_tokens=SUGGESTION_MAX_TOKENS * max(1, k))) as stream:
        async for update in stream:
            if isinstance(update, Done):
                resp = update.response
    assert resp is not None
    refused = len(tool_uses(resp.message))
    if k > 1:
        texts, reason = filters.check_many(text_of(resp.message), k)
        return SuggestionOutcome(
            texts[0] if texts else None, reason, resp.usage, time.perf_counter() - t0, refused, texts
        )
    verdict = filters.check(text_of(resp.message))
    out = SuggestionOutcome(
        verdict.text if verdict.ok else None, verdict.reason, resp.usage, time.perf_counter() - t0, refused
    )
    return out
