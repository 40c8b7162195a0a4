"""The stream reducer on event sequences shaped like the API's (no I/O; it appends to the snapshot)."""

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


def test_a_delta_for_a_block_never_started_is_a_protocol_error() -> None:
    for ev in (
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        {"type": "content_block_stop", "index": 0},
    ):
        with pytest.raises(StreamProtocolError, match="never started"):
            run([START, ev])


def test_reading_blocks_mid_stream_sees_the_text_so_far_and_later_deltas_still_land() -> None:
    # Chunks are folded into the block when it is read: a read in the middle must neither lose nor repeat
    # chunks (the cancel path reads the blocks of an unfinished stream to bill what was streamed).
    def delta(text: str) -> dict:
        return {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}

    snap = run(
        [START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    )
    for part in ("a", "b"):
        snap = accumulate_event(delta(part), snap)
    assert snap.blocks[0]["text"] == "ab"
    assert snap.block(0)["text"] == "ab"
    for part in ("c", "d"):
        snap = accumulate_event(delta(part), snap)
    snap = accumulate_event({"type": "content_block_stop", "index": 0}, snap)
    assert snap.completed_index == 0 and snap.blocks[0]["text"] == "abcd"
