"""What the request's own parameters do to a scripted answer, as the API documents them.

A script says what the model would answer; the request can still change the shape of that answer:
``tool_choice`` (``none`` forbids tool calls; ``any``/``tool`` force one and suppress text before it;
``disable_parallel_tool_use`` keeps one call), thinking (on or off, ``display: omitted`` empties the text
but keeps the signature), ``stop_sequences`` (the text ends before the first one, which is reported) and
``max_tokens`` (the text is cut, tool calls are dropped). Pure functions of the reply and the request.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace
from typing import Any

from speculate.sim.profiles import ModelProfile
from speculate.sim.script import Reply, fallback
from speculate.sim.tokens import CHARS_PER_TOKEN, output_tokens
from speculate.sim.validate import thinking_on


def signature(thinking: str) -> str:
    """A deterministic stand-in for the API's opaque signature: the same thinking, the same bytes (so a
    client that sends the block back keeps its prompt cache)."""
    return base64.b64encode(hashlib.sha256(b"speculate-sim\x00" + thinking.encode()).digest() * 3).decode()


def _tool_choice(reply: Reply, choice: Any) -> Reply:
    if not isinstance(choice, dict):
        return reply
    kind = choice.get("type")
    content = reply.content
    calls = [b for b in content if b["type"] == "tool_use"]
    if kind == "none" and calls:
        kept = [b for b in content if b["type"] != "tool_use"]
        if not any(b["type"] == "text" for b in kept):
            return fallback(f"{reply.source} calls tools but the request's tool_choice is none")
        return replace(
            reply, content=kept, stop_reason="end_turn", source=reply.source + " (tool_choice none)"
        )
    if kind in ("any", "tool"):
        # The API prefills the assistant turn to force a call: no text comes before it.
        wanted = [b for b in calls if kind == "any" or b["name"] == choice.get("name")]
        if not wanted:
            return fallback(f"{reply.source} does not call the tool the request's tool_choice forces")
        thinking = [b for b in content if b["type"] == "thinking"]
        return replace(reply, content=thinking + wanted, stop_reason="tool_use")
    if choice.get("disable_parallel_tool_use") and len(calls) > 1:
        first = content.index(calls[0])
        return replace(
            reply, content=content[: first + 1], source=reply.source + " (one call: parallel disabled)"
        )
    return reply


def _thinking(reply: Reply, body: dict[str, Any], profile: ModelProfile) -> Reply:
    blocks = [b for b in reply.content if b["type"] == "thinking"]
    if not blocks:
        return reply
    if not thinking_on(body, profile):
        return replace(reply, content=[b for b in reply.content if b["type"] != "thinking"])
    omitted = (body.get("thinking") or {}).get("display") == "omitted"
    content = [
        {
            "type": "thinking",
            "thinking": "" if omitted else b["thinking"],
            "signature": signature(b["thinking"]),
        }
        if b["type"] == "thinking"
        else b
        for b in reply.content
    ]
    return replace(reply, content=content)


def _stop_sequences(reply: Reply, stops: list[str] | None) -> Reply:
    if not stops:
        return reply
    for i, block in enumerate(reply.content):
        if block["type"] != "text":
            continue
        hits = [(block["text"].find(s), s) for s in stops if s in block["text"]]
        if hits:
            at, stop = min(hits)
            kept = (
                [*reply.content[:i], {"type": "text", "text": block["text"][:at]}]
                if at
                else reply.content[:i]
            )
            return replace(reply, content=kept, stop_reason="stop_sequence", stop_sequence=stop)
    return reply


def _max_tokens(reply: Reply, max_tokens: int, scale: float) -> Reply:
    """What a model cut off at ``max_tokens`` returns: the text so far, no tool calls."""
    if output_tokens(reply.content) * scale <= max_tokens:
        return reply
    budget = int(max_tokens * CHARS_PER_TOKEN / scale)
    content: list[dict[str, Any]] = []
    for block in reply.content:
        key = {"text": "text", "thinking": "thinking"}.get(block["type"])
        if key is None or budget <= 0:
            break
        content.append({**block, key: block[key][:budget]})
        budget -= len(block[key])
    return replace(reply, content=content, stop_reason="max_tokens", stop_sequence=None,
                   source=reply.source + " (truncated)")  # fmt: skip


def shape(reply: Reply, body: dict[str, Any], profile: ModelProfile) -> Reply:
    """The answer this request gets once its parameters are applied to the scripted ``reply``."""
    if reply.is_fallback:
        return _max_tokens(reply, body["max_tokens"], profile.token_scale)
    reply = _tool_choice(reply, body.get("tool_choice"))
    reply = _thinking(reply, body, profile)
    reply = _stop_sequences(reply, body.get("stop_sequences"))
    return _max_tokens(reply, body["max_tokens"], profile.token_scale)
