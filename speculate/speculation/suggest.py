"""Prompt suggestion: a forked request on the parent's exact cache key that predicts the next prompt."""

from __future__ import annotations

import time
from contextlib import aclosing
from dataclasses import dataclass, field

from speculate.models.base import CacheKey, Done, Model, Usage
from speculate.prompts import SUGGESTION_INSTRUCTION
from speculate.speculation import filters
from speculate.types import Message, text_of, tool_uses, user

# Short output cap: a suggestion is at most 12 words. CacheKey.request keeps max_tokens when thinking is
# on, so the cap never changes the thinking budget (which would break the cache).
SUGGESTION_MAX_TOKENS = 64
# A parent turn that added more uncached tokens than this makes a fork pay for them again: suppress.
COLD_CACHE_TOKENS = 10_000


@dataclass
class SuggestionOutcome:
    text: str | None  # None: suppressed or filtered
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    refused_tool_calls: int = 0


def suppression_reason(messages: list[Message], *, mode: str, last_error: bool, pending_ask: bool,
                       last_usage: Usage | None, near_limit: bool = False) -> str:
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
    if last_usage is not None and last_usage.input_tokens + last_usage.cache_creation_input_tokens > COLD_CACHE_TOKENS:
        return "cold_cache"
    return ""


async def generate(model: Model, key: CacheKey, messages: list[Message]) -> SuggestionOutcome:
    """Ask the model for the next prompt; tools stay in the request (removing them breaks the cache) and
    any tool call in the answer is refused (ignored)."""
    t0 = time.perf_counter()
    req: list[Message] = [*messages, user(SUGGESTION_INSTRUCTION)]
    resp = None
    async with aclosing(model.stream(key, req, max_tokens=SUGGESTION_MAX_TOKENS)) as stream:
        async for update in stream:
            if isinstance(update, Done):
                resp = update.response
    assert resp is not None
    refused = len(tool_uses(resp.message))
    verdict = filters.check(text_of(resp.message))
    out = SuggestionOutcome(verdict.text if verdict.ok else None, verdict.reason, resp.usage,
                            time.perf_counter() - t0, refused)
    return out
