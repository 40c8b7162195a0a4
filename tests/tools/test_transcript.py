"""The JSONL transcript: one event per line, flushed as written, readable back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from speculate.transcript import Transcript, read_transcript


@dataclasses.dataclass
class Usage:
    input_tokens: int
    cache_read_input_tokens: int


def test_events_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "s.jsonl"
    with Transcript(path, session="abc") as t:
        t.message({"role": "user", "content": [{"type": "text", "text": "héllo"}]})
        assert len(read_transcript(path)) == 1  # flushed before close
        t.usage(Usage(10, 5), request=1)
        t.timing("request", 0.1234567, ttft=0.05)
        t.write("note", path=tmp_path, tags={"a"})
    events = read_transcript(path)
    assert [e["event"] for e in events] == ["message", "usage", "timing", "note"]
    assert all(e["session"] == "abc" and isinstance(e["ts"], float) for e in events)
    assert events[0]["message"]["content"][0]["text"] == "héllo"
    assert (
        events[1]["usage"] == {"input_tokens": 10, "cache_read_input_tokens": 5} and events[1]["request"] == 1
    )
    assert events[2]["seconds"] == 0.123457 and events[2]["name"] == "request"
    assert events[3]["path"] == str(tmp_path) and events[3]["tags"] == ["a"]
    assert path.read_text().count("\n") == 4


def test_appends_and_refuses_after_close(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path) as t:
        t.write("one")
    with Transcript(path) as t:
        t.write("two")
    assert [e["event"] for e in read_transcript(path)] == ["one", "two"]
    with pytest.raises(ValueError, match="closed"):
        t.write("three")
    with Transcript(path) as t, pytest.raises(TypeError, match="cannot serialise object"):
        t.write("bad", value=object())
