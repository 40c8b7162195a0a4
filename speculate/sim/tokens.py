"""The simulator's token estimator: about four characters per token, as Anthropic's docs suggest for English.

Real tokenizers are not public; what matters for the experiments is that counts are deterministic, grow with
the bytes sent, and land near the real order of magnitude. Every block costs at least one token.
"""

from __future__ import annotations

import json
import math
from typing import Any

CHARS_PER_TOKEN = 4.0
# The API adds a handful of framing tokens per tool call and per message; a small constant keeps the
# estimate honest for many short blocks.
TOOL_USE_OVERHEAD = 8


def text_tokens(text: str) -> int:
    """Tokens in a piece of text: ceil(characters / 4), at least 1 for non-empty text."""
    if not text:
        return 0
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def canonical_json(value: Any) -> str:
    """The JSON form the simulator hashes and counts: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def block_tokens(block: Any) -> int:
    """Tokens of one request unit (a content block, a tool definition, a system text block)."""
    if isinstance(block, str):
        return max(1, text_tokens(block))
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text":
            return max(1, text_tokens(str(block.get("text", ""))))
        if kind == "tool_use":
            return (
                TOOL_USE_OVERHEAD
                + text_tokens(str(block.get("name", "")))
                + text_tokens(canonical_json(block.get("input", {})))
            )
        if kind == "tool_result":
            content = block.get("content", "")
            if isinstance(content, list):
                return max(1, sum(block_tokens(b) for b in content))
            return max(1, text_tokens(str(content)))
        if kind == "thinking":
            return max(1, text_tokens(str(block.get("thinking", ""))))
        if kind == "image":
            # The docs' rule of thumb: width*height/750; sizes are unknown here, so a typical 1000x1000 image.
            return 1334
        stripped = {k: v for k, v in block.items() if k != "cache_control"}
        return max(1, text_tokens(canonical_json(stripped)))
    return max(1, text_tokens(canonical_json(block)))


def output_tokens(content: list[dict[str, Any]]) -> int:
    """Tokens the model "generated" for a response's content blocks."""
    return sum(block_tokens(b) for b in content) if content else 1
