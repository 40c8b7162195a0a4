"""Record and replay: a JSONL trace of real requests served back as a scenario with the recorded latencies.

One line per response: ``{"request": <request body>, "response": <final Message>, "timings": {"ttft_s",
"total_s"}}``. Lookup is by :func:`canonical_key`, which ignores what cannot change the answer (streaming,
cache markers, metadata) and writes the project root as ``{root}`` and dates as ``{date}``, so a trace
recorded in one checkout on one day replays in another on another.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from speculate import StrPath
from speculate.errors import SpeculateError
from speculate.sim.clients import normalize_dates, project_root
from speculate.sim.script import Reply

# Request fields that decide what the model answers.
KEY_FIELDS = ("model", "system", "messages", "tools", "tool_choice", "thinking")


class TraceError(SpeculateError, ValueError):
    """A trace file is malformed; ``str()`` is ``file:line: reason``."""


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _replace_root(value: Any, root: str | None, new: str) -> Any:
    if not root:
        return value
    if isinstance(value, str):
        return value.replace(root, new)
    if isinstance(value, dict):
        return {k: _replace_root(v, root, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_root(v, root, new) for v in value]
    return value


def _stable(value: Any, root: str | None) -> Any:
    """Strings as the key sees them: the root (and the form Claude Code derives from it for its project
    directory, ``/a/b`` -> ``-a-b``) as ``{root}``, dates as ``{date}``."""
    if isinstance(value, str):
        if root and root != "/":
            value = value.replace(root, "{root}").replace(root.replace("/", "-"), "{root}")
        return normalize_dates(value)
    if isinstance(value, dict):
        return {k: _stable(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v, root) for v in value]
    return value


def _blocks(content: Any) -> Any:
    # A string and a one-text-block list are the same prompt to the model.
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def canonical_key(request_body: dict[str, Any]) -> str:
    """A hex digest identifying a request for replay: same answer-deciding content, same key."""
    relevant = {k: request_body.get(k) for k in KEY_FIELDS}
    relevant["system"] = _blocks(relevant["system"]) or None
    if isinstance(relevant["messages"], list):
        relevant["messages"] = [
            {**m, "content": _blocks(m.get("content"))} if isinstance(m, dict) else m
            for m in relevant["messages"]
        ]
    relevant = _stable(_strip_cache_control(relevant), project_root(request_body))
    text = json.dumps(relevant, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    raise TypeError(f"cannot record a {type(value).__name__} in a trace")


class TraceWriter:
    """Appends trace lines; thread-safe. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: StrPath) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(
        self,
        request: dict[str, Any],
        response: Any,
        *,
        ttft_s: float,
        total_s: float,
        served: dict[str, Any] | None = None,
    ) -> None:
        """Record one response (a dict or an SDK ``Message``) with its time to first token and total time;
        ``served``: what the simulator adds when it records (arrival and finish times, the script source)."""
        timings = {"ttft_s": ttft_s, "total_s": total_s}
        record: dict[str, Any] = {"request": request, "response": response, "timings": timings}
        if served is not None:
            record["served"] = served
        line = json.dumps(record, default=_jsonable, ensure_ascii=False)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Replay:
    """Serves the responses of one trace file, matched by :func:`canonical_key`."""

    def __init__(self, path: StrPath) -> None:
        self.path = Path(path)
        self._entries: dict[str, tuple[dict[str, Any], str | None, dict[str, float]]] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"{self.path}:0: cannot read trace: {exc}") from exc
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{self.path}:{n}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{where}: not JSON: {exc.msg}") from None
            if not isinstance(record, dict):
                raise TraceError(f"{where}: a trace line must be a JSON object")
            request, response, timings = record.get("request"), record.get("response"), record.get("timings")
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise TraceError(f"{where}: 'request' must be a request body with 'messages'")
            if not isinstance(response, dict) or not isinstance(response.get("content"), list):
                raise TraceError(f"{where}: 'response' must be a Message with 'content'")
            if not isinstance(timings, dict) or not all(
                isinstance(timings.get(k), int | float) and timings[k] >= 0 for k in ("ttft_s", "total_s")
            ):
                raise TraceError(f"{where}: 'timings' must have non-negative numbers ttft_s and total_s")
            # The first recording of a request wins: replay is deterministic.
            self._entries.setdefault(
                canonical_key(request),
                (
                    response,
                    project_root(request),
                    {"ttft_s": float(timings["ttft_s"]), "total_s": float(timings["total_s"])},
                ),
            )

    def __len__(self) -> int:
        return len(self._entries)

    def reply(self, body: dict[str, Any]) -> Reply | None:
        """The recorded reply for this request, with the recorded root moved to this request's root."""
        entry = self._entries.get(canonical_key(body))
        if entry is None:
            return None
        response, recorded_root, timings = entry
        content = _replace_root(response["content"], recorded_root, project_root(body) or "{root}")
        return Reply(
            content=content,
            stop_reason=str(response.get("stop_reason") or "end_turn"),
            source=f"trace {self.path.name}",
            timings=timings,
        )
