"""``speculate stats EVENTS.jsonl``: summarise a session's suggestion and speculation records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from speculate.speculation.events import summarize_records


def stats_main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: speculate stats EVENTS.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        print(f"speculate stats: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 2
    recs = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if "kind" not in rec:
                raise KeyError("kind")
        except (json.JSONDecodeError, KeyError, TypeError):
            print(f"speculate stats: {path}:{n}: not an event record", file=sys.stderr)
            return 2
        recs.append(rec)
    summary = summarize_records(recs)
    for line in summary["speculative_bash"]:
        if line.startswith("off"):  # once, however many speculations it held back
            print(f"speculate stats: speculative Bash was {line}", file=sys.stderr)
    print(json.dumps(summary, indent=2))
    return 0
