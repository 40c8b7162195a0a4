"""Finding and reading the transcript files of an import, skipping what cannot be read.

A folder import goes on past a file or a record it cannot read: each is listed (``file:line: reason``) and
counted, and the command's exit status says that something was skipped (docs/transcripts.md). A file is
skipped whole when it cannot be opened or none of its lines is a record (not a transcript); a bad line in a
file that has records is skipped alone (a torn last line, a session killed while writing, is only counted).
Subagent transcripts (``<session>/subagents/*.jsonl``) are found beside their session.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from speculate.importers.records import BOOKKEEPING, OtherRecord, Record, TranscriptError, read_lines
from speculate.importers.sessions import Counts


@dataclass
class Skipped:
    """What an import could not read: whole files and single records, each ``file[:line]: reason``."""

    files: list[str] = field(default_factory=list)
    records: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.files or self.records)


def discover(paths: Iterable[Path]) -> list[Path]:
    """Session files under ``paths`` (a file, a project directory, or the projects directory), each followed
    by its subagents' files; TranscriptError for a path that does not exist."""
    files: list[Path] = []
    for p in paths:
        if p.is_file():
            found = [p]
        elif p.is_dir():
            found = sorted(p.glob("*.jsonl")) + sorted(p.glob("*/*.jsonl"))
        else:
            raise TranscriptError(str(p), 0, "no such file or directory")
        for f in found:
            files.append(f)
            if f.parent.name != "subagents":  # <session>.jsonl: its subagents are in <session>/subagents/
                files += sorted((f.parent / f.stem / "subagents").glob("*.jsonl"))
    return list(dict.fromkeys(files))


def load(path: Path, counts: Counts, skipped: Skipped) -> list[Record] | None:
    """The records of one file, bad lines skipped and listed; None (the file listed) when it has none."""
    try:
        data = path.read_bytes()
        lines = list(read_lines(path))
    except (OSError, TranscriptError) as e:
        reason = e if isinstance(e, TranscriptError) else TranscriptError(str(path), 0, f"cannot read: {e}")
        skipped.files.append(str(reason))
        counts["files skipped (cannot be read)"] += 1
        return None
    torn_line = data.count(b"\n") + 1 if data and not data.endswith(b"\n") else None
    records = [r for r in lines if not isinstance(r, TranscriptError)]
    bad = [e for e in lines if isinstance(e, TranscriptError)]
    if bad and not records:
        skipped.files.append(f"{bad[0]} (no line of it is a transcript record)")
        counts["files skipped (not a transcript)"] += 1
        return None
    for err in bad:
        if err.line == torn_line:
            counts["torn last lines (skipped)"] += 1
        else:
            skipped.records.append(str(err))
            counts["records skipped (cannot be read)"] += 1
    for r in records:
        counts["records"] += 1
        if isinstance(r, OtherRecord) and r.type not in BOOKKEEPING:
            counts[f"unknown record types ({r.type}, skipped)"] += 1
    return records
