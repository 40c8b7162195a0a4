"""The model interface: an immutable cache key, the request it builds, and what a stream yields.

Everything that forms the prompt-cache key (model, system, tools in order, thinking config) is one frozen
:class:`CacheKey`; a fork reuses the parent's key object and message prefix and so reads its cache.

Breakpoints (the API allows 4): two on the message tail, two on the prefix. A system prompt in two parts
(static, dynamic) gets one on each part: the static one is shared by every session whatever its project;
a single-part system prompt gets one on the tools and one on the system text.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from speculate.errors import SpeculateError
from speculate.types import Block, Message

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
MESSAGE_BREAKPOINTS = 2


@dataclass(frozen=True)
class CacheKey:
    model: str
    system: tuple[str, ...]  # system text blocks in order: (static, dynamic), or one block
    tools_json: tuple[str, ...]  # each tool definition as canonical JSON, in order
    thinking_json: str | None = None
    max_tokens: int = 8192

    @classmethod
    def build(
        cls,
        *,
        model: str,
        system: str | Sequence[str],
        tools: Sequence[dict[str, Any]],
        thinking: dict[str, Any] | None = None,
        max_tokens: int = 8192,
    ) -> CacheKey:
        return cls(
            model=model,
            system=(system,) if isinstance(system, str) else tuple(p for p in system if p),
            tools_json=tuple(json.dumps(t, sort_keys=True) for t in tools),
            thinking_json=json.dumps(thinking, sort_keys=True) if thinking else None,
            max_tokens=max_tokens,
        )

    def request(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> dict[str, Any]:
        """The request body, with cache_control breakpoints on tools, system and the message tail.

        ``max_tokens`` may lower the output cap only without extended thinking: with thinking on, a
        different cap would change the thinking budget and break the cache (the anchors' pitfall).
        """
        tools = [json.loads(t) for t in self.tools_json]
        system: list[dict[str, Any]] = [{"type": "text", "text": t} for t in self.system]
        # The prefix breakpoints go on its last blocks: (static, dynamic) system parts, else tools + system.
        prefix = ([tools[-1]] if tools else []) + system
        for block in prefix[-(MAX_BREAKPOINTS - MESSAGE_BREAKPOINTS) :]:
            block["cache_control"] = EPHEMERAL
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens if (max_tokens is None or self.thinking_json) else max_tokens,
            "system": system,
            "messages": _with_breakpoints(messages),
        }
        if tools:
            body["tools"] = tools
        if self.thinking_json:
            body["thinking"] = json.loads(self.thinking_json)
        return body


def _with_breakpoints(messages: Sequence[Message]) -> list[Message]:
    """Copy of ``messages`` with breakpoints on the last message and on the previous prompt/result message.

    Two message breakpoints (plus tools and system: 4, the API's maximum) let a request read the cache
    written by the previous request even when a long tool turn pushed it past the 20-block lookback.
    """
    out = [copy.deepcopy(m) for m in messages]
    user_idx = [i for i, m in enumerate(out) if m["role"] == "user"]
    for i in user_idx[-MESSAGE_BREAKPOINTS:]:
        blocks = out[i]["content"]
        for b in reversed(blocks):
            if b.get("type") in ("text", "tool_result", "tool_use", "image", "document"):
                b["cache_control"] = EPHEMERAL
                break
    return out


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def add(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }


@dataclass
class ModelResponse:
    message: Message  # role "assistant"
    stop_reason: str | None
    usage: Usage
    model: str = ""
    ttft_s: float = 0.0  # request sent -> first content delta
    total_s: float = 0.0  # request sent -> message_stop
    attempts: int = 1
    raw_events: list[dict[str, Any]] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class TextDelta:
    index: int
    text: str


@dataclass(frozen=True)
class BlockDone:
    index: int
    block: Block


@dataclass(frozen=True)
class Done:
    response: ModelResponse


StreamUpdate = TextDelta | BlockDone | Done


class ModelError(SpeculateError):
    """The model could not answer (retries exhausted, bad request): the message says why, for a person."""


class Model(Protocol):
    """One streamed request. Yields text deltas and completed blocks as they arrive, then :class:`Done`."""

    name: str

    def stream(
        self, key: CacheKey, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncGenerator[StreamUpdate, None]: ...
