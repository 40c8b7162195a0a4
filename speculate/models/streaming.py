"""A reducer over Messages API stream events: ``accumulate_event(event, snapshot) -> snapshot``.

As the SDK's accumulator does, it appends to the snapshot it is given and returns it: each delta costs
time in its own length, so a stream of n deltas costs O(n), not O(n²) as rebuilding an immutable snapshot
(and re-concatenating the text so far) per event did. Text, thinking, signature and tool-input fragments
are kept as lists of chunks and joined when a block is read (``blocks``, ``block(i)``) or completed.

Tool input arrives as ``input_json_delta`` fragments; they are parsed once, at ``content_block_stop``.
Usage comes from ``message_start`` and ``message_delta`` and is cumulative: the last value of each field
wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from speculate.errors import SpeculateError
from speculate.models.base import Usage
from speculate.types import Block


class StreamProtocolError(SpeculateError):
    """The server sent an event sequence the Messages API does not allow."""


# The text-like delta types and the block field each one extends.
_TEXT_FIELDS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
}


@dataclass
class Snapshot:
    id: str = ""
    model: str = ""
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    started: bool = False
    stopped: bool = False
    completed_index: int | None = None  # the block completed by the last event, if any
    # Per block: the block as started, the chunks of each text field not yet folded into it, and the tool
    # input fragments. Private: read through ``blocks``/``block(i)``/``partial_json``.
    _blocks: list[Block] = field(default_factory=list, repr=False)
    _chunks: list[dict[str, list[str]]] = field(default_factory=list, repr=False)
    _json: list[list[str]] = field(default_factory=list, repr=False)

    def block(self, i: int) -> Block:
        """Block ``i`` with every chunk received so far folded in (the fold happens once per chunk)."""
        pending = self._chunks[i]
        if pending:
            b = self._blocks[i]
            for name, chunks in pending.items():
                b[name] = b.get(name, "") + "".join(chunks)
            pending.clear()
        return self._blocks[i]

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(self.block(i) for i in range(len(self._blocks)))

    @property
    def partial_json(self) -> tuple[str, ...]:
        """Per block, the tool input fragments received so far, joined ("" for other blocks)."""
        return tuple("".join(parts) for parts in self._json)


def _usage(prev: Usage, raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return prev
    fields = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    vals = {f: (raw[f] if raw.get(f) is not None else getattr(prev, f)) for f in fields}
    return Usage(**vals)


def accumulate_event(event: dict[str, Any], snap: Snapshot) -> Snapshot:
    t = event.get("type")
    snap.completed_index = None
    if t == "message_start":
        m = event["message"]
        snap.id, snap.model, snap.started = m.get("id", ""), m.get("model", ""), True
        snap.usage = _usage(snap.usage, m.get("usage"))
        return snap
    if not snap.started and t not in ("ping", "error"):
        raise StreamProtocolError(f"event {t!r} before message_start")
    if t == "content_block_start":
        i = event["index"]
        if i != len(snap._blocks):
            raise StreamProtocolError(f"content_block_start index {i}, expected {len(snap._blocks)}")
        block = dict(event["content_block"])
        if block.get("type") == "tool_use":
            block["input"] = {}
        snap._blocks.append(block)
        snap._chunks.append({})
        snap._json.append([])
        return snap
    if t == "content_block_delta":
        i, d = event["index"], event["delta"]
        if not 0 <= i < len(snap._blocks):
            raise StreamProtocolError(f"content_block_delta for block {i}, which was never started")
        dt = d.get("type")
        if dt in _TEXT_FIELDS:
            name, key = _TEXT_FIELDS[dt]
            snap._chunks[i].setdefault(name, []).append(d[key])
        elif dt == "input_json_delta":
            snap._json[i].append(d["partial_json"])
        elif dt == "citations_delta":
            b = snap._blocks[i]
            b["citations"] = [*b.get("citations", []), d["citation"]]
        return snap
    if t == "content_block_stop":
        i = event["index"]
        if not 0 <= i < len(snap._blocks):
            raise StreamProtocolError(f"content_block_stop for block {i}, which was never started")
        block = snap.block(i)
        if block.get("type") in ("tool_use", "server_tool_use"):
            raw = "".join(snap._json[i])
            try:
                block["input"] = json.loads(raw) if raw else {}
            except json.JSONDecodeError as e:
                # Truncated input (e.g. max_tokens mid-block): keep the text so the tool reports it.
                block["input"] = {"__invalid_json__": raw, "__error__": str(e)}
        snap.completed_index = i
        return snap
    if t == "message_delta":
        d = event.get("delta", {})
        snap.stop_reason = d.get("stop_reason", snap.stop_reason)
        snap.usage = _usage(snap.usage, event.get("usage"))
        return snap
    if t == "message_stop":
        snap.stopped = True
        return snap
    # ping, and unknown event types, which the API says clients should ignore.
    return snap
