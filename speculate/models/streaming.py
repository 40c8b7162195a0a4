"""A pure reducer over Messages API stream events: ``accumulate_event(event, snapshot) -> snapshot``.

Tool input arrives as ``input_json_delta`` fragments; they are concatenated as a string and parsed once,
at ``content_block_stop``. Usage comes from ``message_start`` and ``message_delta`` and is cumulative:
the last value of each field wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from speculate.errors import SpeculateError
from speculate.models.base import Usage
from speculate.types import Block


class StreamProtocolError(SpeculateError):
    """The server sent an event sequence the Messages API does not allow."""


@dataclass(frozen=True)
class Snapshot:
    id: str = ""
    model: str = ""
    blocks: tuple[Block, ...] = ()
    partial_json: tuple[str, ...] = ()  # per block; "" for non-tool blocks
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    started: bool = False
    stopped: bool = False
    completed_index: int | None = None  # the block completed by the last event, if any


def _set(seq: tuple[Any, ...], i: int, v: Any) -> tuple[Any, ...]:
    return (*seq[:i], v, *seq[i + 1 :])


def _usage(prev: Usage, raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return prev
    fields = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    vals = {f: (raw[f] if raw.get(f) is not None else getattr(prev, f)) for f in fields}
    return Usage(**vals)


def accumulate_event(event: dict[str, Any], snap: Snapshot) -> Snapshot:
    t = event.get("type")
    snap = replace(snap, completed_index=None)
    if t == "message_start":
        m = event["message"]
        return replace(
            snap,
            id=m.get("id", ""),
            model=m.get("model", ""),
            started=True,
            usage=_usage(snap.usage, m.get("usage")),
        )
    if not snap.started and t not in ("ping", "error"):
        raise StreamProtocolError(f"event {t!r} before message_start")
    if t == "content_block_start":
        i = event["index"]
        if i != len(snap.blocks):
            raise StreamProtocolError(f"content_block_start index {i}, expected {len(snap.blocks)}")
        block = dict(event["content_block"])
        if block.get("type") == "tool_use":
            block["input"] = {}
        return replace(snap, blocks=(*snap.blocks, block), partial_json=(*snap.partial_json, ""))
    if t == "content_block_delta":
        i, d = event["index"], event["delta"]
        block = dict(snap.blocks[i])
        dt = d.get("type")
        if dt == "text_delta":
            block["text"] = block.get("text", "") + d["text"]
        elif dt == "input_json_delta":
            return replace(
                snap, partial_json=_set(snap.partial_json, i, snap.partial_json[i] + d["partial_json"])
            )
        elif dt == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + d["thinking"]
        elif dt == "signature_delta":
            block["signature"] = block.get("signature", "") + d["signature"]
        elif dt == "citations_delta":
            block["citations"] = [*block.get("citations", []), d["citation"]]
        return replace(snap, blocks=_set(snap.blocks, i, block))
    if t == "content_block_stop":
        i = event["index"]
        block = dict(snap.blocks[i])
        if block.get("type") in ("tool_use", "server_tool_use"):
            raw = snap.partial_json[i]
            try:
                block["input"] = json.loads(raw) if raw else {}
            except json.JSONDecodeError as e:
                # Truncated input (e.g. max_tokens mid-block): keep the text so the tool reports it.
                block["input"] = {"__invalid_json__": raw, "__error__": str(e)}
        return replace(snap, blocks=_set(snap.blocks, i, block), completed_index=i)
    if t == "message_delta":
        d = event.get("delta", {})
        return replace(
            snap,
            stop_reason=d.get("stop_reason", snap.stop_reason),
            usage=_usage(snap.usage, event.get("usage")),
        )
    if t == "message_stop":
        return replace(snap, stopped=True)
    # ping, and unknown event types, which the API says clients should ignore.
    return snap
