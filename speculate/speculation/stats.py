"""``speculate stats EVENTS.jsonl``: summarise a session's suggestion and speculation records, each validated
against the schema the engine writes them with. The records hold untrusted text (suggestions, commands):
the JSON summary escapes it, and every other line is made :func:`speculate.term.visible`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from speculate.speculation.events import RecordError, read_records, summarize_records
from speculate.term import visible


def stats_main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: speculate stats EVENTS.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        recs = read_records(path)
    except OSError as e:
        print(visible(f"speculate stats: error: cannot read {path}: {e.strerror}"), file=sys.stderr)
        return 2
    except RecordError as e:  # one line, not a traceback: the file and line, and pydantic's reason
        print(visible(f"speculate stats: error: {e}"), file=sys.stderr)
        return 2
    summary = summarize_records(recs)
    for line in summary["speculative_bash"]:
        if line.startswith("off"):  # once, however many speculations it held back
            print(visible(f"speculate stats: speculative Bash was {line}"), file=sys.stderr)
    print(json.dumps(summary, indent=2))
    return 0
