"""Records: what the harness writes validates against the schema the report reads; a bad line is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.records import TurnRecord, load_records


def test_a_bad_line_is_named_with_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "turns.jsonl"
    p.write_text("\n" + json.dumps({"session": "x", "arm": "fork"}) + "\n")
    with pytest.raises(ValueError, match=r"turns\.jsonl:2: not a valid TurnRecord"):
        load_records(p, TurnRecord)
    assert load_records(tmp_path / "absent.jsonl", TurnRecord) == []
