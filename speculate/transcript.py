"""A session transcript as JSONL: one self-contained JSON object per line (messages, usage, timings).

Lines are flushed as they are written, so a crashed or interrupted session leaves a readable transcript.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pydantic import BaseModel


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, (Path, os.PathLike)):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"transcript cannot serialise {type(obj).__name__}: {obj!r:.80}")


class Transcript:
    """Appends events to ``path`` (parents created). Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: str | os.PathLike[str], *, session: str | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.session = session
        self._f: IO[str] | None = open(self.path, "a", encoding="utf-8")  # closed in close()
        self.events_written = 0

    def write(self, event: str, **data: Any) -> None:
        """One line ``{"ts": ..., "event": event, ["session": ...], **data}``."""
        if self._f is None:
            raise ValueError(f"transcript {self.path} is closed")
        record: dict[str, Any] = {"ts": round(time.time(), 6), "event": event}
        if self.session is not None:
            record["session"] = self.session
        record.update(data)
        self._f.write(json.dumps(record, default=_jsonable, ensure_ascii=False) + "\n")
        self._f.flush()
        self.events_written += 1

    def message(self, message: Any, **extra: Any) -> None:
        """A message appended to the conversation (a Messages API dict: role + content)."""
        self.write("message", message=message, **extra)

    def usage(self, usage: Any, **extra: Any) -> None:
        """Token usage of one response (input/output/cache_creation/cache_read tokens)."""
        self.write("usage", usage=usage, **extra)

    def timing(self, name: str, seconds: float, **extra: Any) -> None:
        """How long a named step took (a request, time to first token, a tool call)."""
        self.write("timing", name=name, seconds=round(seconds, 6), **extra)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> Transcript:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_transcript(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All events of a transcript, in order (for tests and analysis)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


__all__ = ["Transcript", "read_transcript"]
