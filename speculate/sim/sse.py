"""The streaming event sequence for a finished Message, as a pure function (the server only paces it).

message_start (usage with the cache fields, output 1) -> ping -> per block content_block_start / deltas
(``text_delta``; ``thinking_delta`` then one ``signature_delta``; ``input_json_delta``, the first one empty as
the API sends it) / content_block_stop ->
message_delta (stop_reason, cumulative usage) -> message_stop; another ping every ``PING_EVERY`` deltas.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

CHUNK_CHARS = 24  # about six tokens per delta, close to what the API streams
PING_EVERY = 40


@dataclass(frozen=True)
class Event:
    name: str
    data: dict[str, Any]
    fraction: float  # share of the output generated before this event is due (0 = first token)

    def encode(self) -> bytes:
        return f"event: {self.name}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n".encode()


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _body(block: dict[str, Any]) -> str:
    if block["type"] == "text":
        return str(block["text"])
    if block["type"] == "thinking":
        return str(block["thinking"])
    return json.dumps(block["input"], ensure_ascii=False)


def _opening_and_deltas(
    block: dict[str, Any], body: str, chunk_chars: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": ""}, [
            {"type": "text_delta", "text": p} for p in _chunks(body, chunk_chars)
        ]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _chunks(body, chunk_chars) if p]
        return {"type": "thinking", "thinking": "", "signature": ""}, [
            *deltas,
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    return opening, [
        {"type": "input_json_delta", "partial_json": p} for p in ["", *_chunks(body, chunk_chars)]
    ]


def events(message: dict[str, Any], *, chunk_chars: int = CHUNK_CHARS) -> list[Event]:
    blocks = message["content"]
    bodies = [_body(b) for b in blocks]
    total_chars = max(1, sum(len(x) for x in bodies))
    done = 0
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    out = [
        Event("message_start", {"type": "message_start", "message": start}, 0.0),
        Event("ping", {"type": "ping"}, 0.0),
    ]
    sent = 0
    for index, (block, body) in enumerate(zip(blocks, bodies, strict=True)):
        opening, deltas = _opening_and_deltas(block, body, chunk_chars)
        out.append(
            Event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
                done / total_chars,
            )
        )
        for delta in deltas:
            out.append(
                Event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    done / total_chars,
                )
            )
            done += len(delta.get("text") or delta.get("thinking") or delta.get("partial_json") or "")
            sent += 1
            if sent % PING_EVERY == 0:
                out.append(Event("ping", {"type": "ping"}, done / total_chars))
        out.append(
            Event("content_block_stop", {"type": "content_block_stop", "index": index}, done / total_chars)
        )
    final_usage = {k: v for k, v in usage.items() if k != "service_tier"}
    out.append(
        Event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
                "usage": final_usage,
            },
            1.0,
        )
    )
    out.append(Event("message_stop", {"type": "message_stop"}, 1.0))
    return out


def streamed_output_tokens(evs: list[Event], sent: int, output_tokens: int) -> int:
    """Output tokens a stream had delivered once its first ``sent`` events went out: the answer's tokens in
    proportion to the characters sent (what a client that cancels there is billed for), at least 1 once
    ``message_start`` was sent (its usage reports one)."""
    if sent <= 0:
        return 0
    if sent >= len(evs):
        return output_tokens
    # An event's fraction is the share generated before it is due; after it went out, the next one's.
    fraction = evs[sent].fraction
    return max(1, math.ceil(fraction * output_tokens))
