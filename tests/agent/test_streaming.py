"""The stream reducer on event sequences shaped like the API's (pure: no I/O)."""

from __future__ import annotations

import pytest

from speculate.models.streaming import Snapshot, StreamProtocolError, accumulate_event


def run(events: list[dict]) -> Snapshot:
    snap = Snapshot()
    for ev in events:
        snap = accumulate_event(ev, snap)
    return snap


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "model": "m",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 1,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 0,
        },
    },
}


def test_text_tool_json_fragments_and_cumulative_usage() -> None:
    snap = run(
        [
            START,
            {"type": "ping"},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"file_'},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'path": "a.py"}'},
            },
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}},
            {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 9}},
            {"type": "message_stop"},
        ]
    )
    assert snap.blocks[0] == {"type": "text", "text": "Hello"}
    assert snap.blocks[1]["input"] == {"file_path": "a.py"}
    assert snap.stop_reason == "tool_use" and snap.stopped
    # cumulative: last value wins; fields absent from message_delta keep message_start's value
    assert (snap.usage.output_tokens, snap.usage.input_tokens, snap.usage.cache_creation_input_tokens) == (
        9,
        10,
        100,
    )


def test_json_parsed_only_at_block_stop_and_truncated_json_reported() -> None:
    events = [
        START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "Bash", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"comm'},
        },
    ]
    mid = run(events)
    assert mid.blocks[0]["input"] == {} and mid.partial_json[0] == '{"comm'
    end = accumulate_event({"type": "content_block_stop", "index": 0}, mid)
    assert end.blocks[0]["input"]["__invalid_json__"] == '{"comm'
    assert end.completed_index == 0


def test_thinking_and_signature_pass_through() -> None:
    snap = run(
        [
            START,
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hmm"},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig"},
            },
            {"type": "content_block_stop", "index": 0},
        ]
    )
    assert snap.blocks[0] == {"type": "thinking", "thinking": "hmm", "signature": "sig"}


def test_out_of_order_events_are_protocol_errors() -> None:
    with pytest.raises(StreamProtocolError):
        run([{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}])
    with pytest.raises(StreamProtocolError):
        run(
            [
                START,
                {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
            ]
        )
