"""The client benchmark's arithmetic on a recorded trace: overhead per tool step and cache-read share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.clients import Measure, table


def record(
    source: str, arrived: float, finished: float, calls: list[str], read: int, total: int
) -> dict[str, Any]:
    content = [{"type": "tool_use", "id": f"t{i}", "name": n, "input": {}} for i, n in enumerate(calls)]
    usage = {"input_tokens": total - read, "cache_creation_input_tokens": 0, "cache_read_input_tokens": read}
    return {"request": {}, "response": {"content": content or [{"type": "text", "text": "x"}], "usage": usage},
            "served": {"arrived_s": arrived, "finished_s": finished, "source": source}}  # fmt: skip


def test_gaps_between_a_tool_answer_and_the_next_request_are_the_client_overhead(tmp_path: Path) -> None:
    turn = "scenario 's' turn 1"
    trace = tmp_path / "t.jsonl"
    lines = [
        record(f"{turn} step 1", 0.0, 1.0, ["Read", "Grep"], 0, 1000),
        record(f"{turn} step 2", 1.05, 2.0, ["Bash"], 900, 1100),  # 50 ms after step 1's file tools
        record(f"{turn} step 3", 3.5, 4.0, [], 1000, 1200),  # 1.5 s after the shell step
        record(f"{turn} suggestion", 4.01, 4.2, [], 1190, 1210),
        record("scenario 's' turn 2 step 1", 9.0, 9.5, ["Edit"], 1100, 1250),  # a new turn: no gap
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in lines))
    m = Measure("c")
    m.add_trace(trace)
    assert [round(g) for g in m.file_step_ms] == [50] and [round(g) for g in m.shell_step_ms] == [1500]
    assert (m.loop_read, m.loop_input, m.suggestion_read, m.requests) == (3000, 4550, 1190, 5)
    assert m.prefix_tokens == [1000]
    text = table([m], scenario="s", reps=1, time_scale=1.0, model="x")
    assert "| client overhead per file-tool step (ms) | 50 (50-50) |" in text and "| 65.9% |" in text
