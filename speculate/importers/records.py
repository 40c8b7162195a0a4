"""Claude Code's session transcripts, line by line: one JSON record per line, validated at the boundary.

Claude Code writes each session to ``~/.claude/projects/<project>/<session>.jsonl``. The records this package
reads are ``user`` (prompts, tool results, interruptions, compaction summaries), ``assistant`` (one record
per content block, several sharing a ``message.id``) and ``system`` (turn durations, compaction boundaries,
local commands); every record of the conversation carries ``uuid`` and ``parentUuid``. Bookkeeping records
(:data:`BOOKKEEPING`) are read and ignored; any other type is skipped and counted by its name. Shapes
observed from Claude Code 2.1.332 (the version scripts/setup.sh installs); older versions differ only in
fields this module does not need.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from speculate import StrPath
from speculate.errors import SpeculateError

# Records that are not part of the conversation: request logs, cost and mode snapshots, file-history
# backups, the prompt queue, titles. Known, so they are not counted as unknown.
BOOKKEEPING = frozenset({
    "attachment", "queue-operation", "last-prompt", "atis-latch", "tools-used", "cost-state", "mode",
    "permission-mode", "api-request", "api-request-blob", "api-request-shape", "file-history-snapshot",
    "file-history-delta", "summary", "custom-title", "progress", "agent-name", "tag", "pr-link",
})  # fmt: skip


class TranscriptError(SpeculateError, ValueError):
    """A transcript cannot be read; ``str()`` is ``file:line: reason`` (``file: reason`` for line 0: the
    whole file)."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}:{line}: {reason}" if line else f"{source}: {reason}")
        self.source = source
        self.line = line


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")

    uuid: str | None = None
    parentUuid: str | None = None
    logicalParentUuid: str | None = None  # a compaction boundary's link across the cut
    isSidechain: bool = False  # a subagent's conversation
    agentId: str | None = None  # on a subagent's records
    timestamp: datetime | None = None
    line: int = 0  # where it was read (set by read_records)

    @property
    def parent(self) -> str | None:
        return self.parentUuid if self.parentUuid is not None else self.logicalParentUuid


class UserMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user"]
    content: str | list[dict[str, Any]]


class UserRecord(_Record):
    type: Literal["user"]
    message: UserMessage
    isMeta: bool = False  # injected by Claude Code, not typed
    isCompactSummary: bool = False
    promptSource: str | None = None  # typed | queued | suggestion_accepted | sdk | system
    origin: dict[str, Any] | None = None  # {"kind": "human" | "task-notification" | ...}
    toolUseResult: Any = None  # the tool's structured result: file contents, stdout, ...
    interruptedMessageId: str | None = None
    cwd: str | None = None
    sessionId: str | None = None
    version: str | None = None


class AssistantMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["assistant"]
    id: str | None = None
    model: str | None = None
    content: list[dict[str, Any]]


class AssistantRecord(_Record):
    type: Literal["assistant"]
    message: AssistantMessage
    isApiErrorMessage: bool = False  # a synthetic message reporting an API error
    cwd: str | None = None
    sessionId: str | None = None
    version: str | None = None


class SystemRecord(_Record):
    type: Literal["system"]
    subtype: str | None = None  # turn_duration | compact_boundary | local_command | api_error | ...
    content: str | None = None


class OtherRecord(_Record):
    """A bookkeeping record (kept only for its place in the parent chain) or an unknown one."""

    type: str


Record = UserRecord | AssistantRecord | SystemRecord | OtherRecord
_MODELS: dict[str, type[UserRecord] | type[AssistantRecord] | type[SystemRecord]] = {
    "user": UserRecord,
    "assistant": AssistantRecord,
    "system": SystemRecord,
}


def _reason(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def parse_line(text: str, *, source: str, line: int) -> Record:
    """One transcript line as a record; :class:`TranscriptError` names the file and line when it is not one."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise TranscriptError(
            source,
            line,
            f"not JSON ({e.msg}): not a Claude Code session transcript (one JSON record per line)?",
        ) from None
    if not isinstance(raw, dict):
        raise TranscriptError(source, line, f"a record must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind:
        raise TranscriptError(
            source, line, "a record must have a string 'type' (user, assistant, system, ...)"
        )
    model = _MODELS.get(kind, OtherRecord)
    try:
        rec = model.model_validate({**raw, "line": line})
    except ValidationError as e:
        raise TranscriptError(source, line, f"{kind} record: {_reason(e)}") from None
    return rec


def read_records(path: StrPath) -> Iterator[Record]:
    """The records of one transcript file, in file order (blank lines skipped); the first bad line raises."""
    for r in read_lines(path):
        if isinstance(r, TranscriptError):
            raise r
        yield r


def read_lines(path: StrPath) -> Iterator[Record | TranscriptError]:
    """Each non-blank line of a transcript as a record, or as the error that names why it is not one (so a
    reader can skip a bad record and go on); a file that cannot be read at all raises."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise TranscriptError(str(p), 0, f"cannot read: {e.strerror or e}") from None
    for n, raw in enumerate(data.splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield TranscriptError(str(p), n, f"not UTF-8 text ({e.reason})")
            continue
        if text.strip():
            try:
                yield parse_line(text, source=str(p), line=n)
            except TranscriptError as e:
                yield e


def blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a string is one text block)."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def text_of(content: Any) -> str:
    """The text of a tool result's content (a string, or text blocks joined by newlines)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""
