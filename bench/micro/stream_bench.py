"""What the stream reducer costs over one long stream: 10,000 deltas (text, then one tool call's input).

Run: ``.venv/bin/python -m bench.micro.stream_bench [--deltas 10000] [--reps 7]``. Prints the median time
over the whole stream and per delta. To compare with an older reducer, run the same command in a checkout
of that commit (``git worktree add /tmp/old <commit>``, then run it there with this file copied in): the
reducer is imported from the checkout the command runs in.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.errors import BenchRunFailed
from speculate.models.streaming import Snapshot, accumulate_event


def stream(deltas: int) -> list[dict[str, Any]]:
    """A message with a text block of ``deltas // 2`` deltas and a tool_use block of the rest."""
    text, tool = deltas // 2, deltas - deltas // 2
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "model": "bench", "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word "}}
        for _ in range(text)
    ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t", "name": "Write", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"c":"'},
        },
    ]
    events += [
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "abcd"},
        }
        for _ in range(tool - 2)
    ]
    events += [
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": deltas}},
        {"type": "message_stop"},
    ]
    return events


def run_once(events: list[dict[str, Any]]) -> float:
    t0 = time.perf_counter()
    snap = Snapshot()
    for ev in events:
        snap = accumulate_event(ev, snap)
    elapsed = time.perf_counter() - t0
    if not (snap.stopped and len(snap.blocks) == 2):
        raise BenchRunFailed("the benchmark stream did not reduce to two blocks")
    return elapsed


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--deltas", type=int, default=10_000)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args(argv)
    events = stream(a.deltas)
    times = [run_once(events) for _ in range(a.reps)]
    med = statistics.median(times)
    print(
        f"stream reducer: {a.deltas} deltas, median of {a.reps}: {med * 1e3:.1f} ms ({med / a.deltas * 1e6:.2f} µs/delta)"
    )


if __name__ == "__main__":
    main()
