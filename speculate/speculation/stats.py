"""``speculate stats EVENTS.jsonl``: summarise a session's suggestion and speculation records, each validated
against the schema the engine writes them with. The records hold untrusted text (suggestions, commands):
the JSON summary escapes it, and every other line is made :func:`speculate.term.visible`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from speculate.speculation.events import RecordError, read_records, summarize_records
from speculate.term import visible


def configure(p: argparse.ArgumentParser) -> None:
    """The options of ``speculate stats`` (on the command tree of :mod:`speculate.cli`)."""
    p.description = (
        "Summarise a session's suggestion and speculation records (the JSONL file `speculate repl "
        "--events FILE` writes) as JSON: acceptance, time saved, boundaries, tokens and cost wasted."
    )
    p.add_argument("events", type=Path, metavar="EVENTS.jsonl", help="the records file")
    p.set_defaults(run=lambda ns: summarize_file(ns.events))


def stats_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="speculate stats")
    configure(p)
    try:
        ns = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    return summarize_file(ns.events)


def summarize_file(path: Path) -> int:
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
