"""Pairing: latency jitter is keyed on the scripted position (scenario, turn, request index), not on the
request's content, so the arms of one rep draw the same jitter even when their tool outputs differ."""

from __future__ import annotations

from typing import Any

from speculate.sim import load_scenario
from speculate.sim.engine import Engine

from .conftest import MODEL, SYSTEM, TINY

FIRST = "why does page 2 repeat an item?"


def second_request(engine: Engine, tool_output: str) -> dict[str, Any]:
    first = {
        "model": MODEL,
        "max_tokens": 2000,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": FIRST}],
    }
    msg = engine.plan(first).message
    results = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": tool_output}
        for b in msg["content"]
        if b["type"] == "tool_use"
    ]
    return {
        **first,
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": msg["content"]},
            {"role": "user", "content": results},
        ],
    }


def timings(seed: int, tool_output: str) -> tuple[float, float, str]:
    engine = Engine([load_scenario(TINY)], seed=seed, clock=lambda: 0.0)
    p = engine.plan(second_request(engine, tool_output))
    return p.ttft_s, p.total_s, p.source


def test_same_position_same_jitter_whatever_the_tool_output() -> None:
    a, b = timings(3, "exit 0: aaaa"), timings(3, "exit 1: bbbb")  # same length, different content
    assert a[2] == b[2] and "step 2" in a[2]
    assert a[:2] == b[:2]
    assert timings(4, "exit 0: aaaa")[:2] != a[:2]  # another rep (seed) draws anew
