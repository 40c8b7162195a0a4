"""The conversation in a transcript: its main line, split into the user's turns.

The main line is the parent chain from the last record back to the first (a compaction boundary links across
the cut with ``logicalParentUuid``), so a prompt abandoned by a rewind or re-sent after an early interrupt
is left out. A file with no parent links at all (Claude Code 1.0.x wrote ``parentUuid: null`` on every
record) is read in file order, and a chain cut by a missing record (skipped as unreadable) goes on from the
record before it in the file. A subagent's own file (``<session>/subagents/*.jsonl``, every record
``isSidechain``) is a session of its own: its first prompt is the one the main agent gave it. On it, a *prompt* is a user record the user typed (or took from a suggestion), not a tool
result, an injected reminder, a slash command or a system-initiated turn (a finished background task).
Each assistant message (the records sharing a ``message.id``) is one step; tool results are matched to
their calls by id. ``/clear`` starts a new session. Everything set aside is counted in :class:`Counts`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from speculate.importers.records import (
    AssistantRecord,
    OtherRecord,
    Record,
    SystemRecord,
    UserRecord,
    blocks,
    text_of,
)

INTERRUPTED = "[Request interrupted by user"  # "...]" or "... for tool use]"
ACCEPTED = "suggestion_accepted"  # promptSource of a prompt taken from Claude Code's suggestion (Tab)
# Text Claude Code writes as a user record but the user did not type: slash commands and their output,
# shell-mode input and output, notifications.
_INJECTED = re.compile(
    r"^\s*<(command-name|command-message|local-command-[a-z]+|bash-input|bash-stdout|"
    r"bash-stderr|task-notification|system-reminder|user-memory-input)>"
)
_COMMAND = re.compile(r"<command-name>/?([^<]*)</command-name>")
# Context an IDE or Claude Code put into a prompt's text (the file open in the editor, the selection, a
# reminder): not typed. Claude Code strips the same tags before it shows a prompt.
_CONTEXT = re.compile(r"<(ide_opened_file|ide_selection|system-reminder)(?:\s[^>]*)?>[\s\S]*?</\1>\n?")


class Counts(Counter[str]):
    """What an import set aside or noticed, by kind (printed as the command's summary)."""


@dataclass
class ToolResult:
    text: str
    is_error: bool
    structured: Any  # the record's toolUseResult
    images: int
    at: datetime | None


@dataclass
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]
    result: ToolResult | None = None


@dataclass
class Step:
    """One assistant message: its text and thinking, then its tool calls."""

    message_id: str | None
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    tools: list[ToolUse] = field(default_factory=list)
    at: datetime | None = None  # its last block's record


@dataclass
class RecordedTurn:
    prompt: str
    source: str | None  # promptSource
    at: datetime | None
    line: int
    uuid: str | None = None  # the prompt's record (a forked session's file copies it, uuid and all)
    steps: list[Step] = field(default_factory=list)
    interrupted: bool = False
    end: datetime | None = None  # when the answer ended (last assistant block, tool result or interrupt)

    def touch(self, at: datetime | None) -> None:
        if at is not None and (self.end is None or at > self.end):
            self.end = at


@dataclass
class RecordedSession:
    source: str  # the file
    session_id: str
    cwd: str | None
    version: str | None
    model: str | None
    turns: list[RecordedTurn]
    part: int = 1  # 2, 3, ... for the sessions after a /clear in the same file
    agent_id: str | None = None  # a subagent's transcript (a sidechain of session_id)

    @property
    def sources(self) -> tuple[int, int]:
        """(prompts whose promptSource was recorded, prompts without one: how they were entered is unknown)."""
        known = sum(t.source is not None for t in self.turns)
        return known, len(self.turns) - known


def main_line(records: list[Record], counts: Counts, *, sidechain: bool = False) -> list[Record]:
    """The records of the conversation the session ended on, in file order: the parent chain from the last
    record, plus the results of its parallel tool calls (Claude Code chains each result to its own call's
    record, so all but the last call's result hang off the chain). ``sidechain``: a subagent's own file,
    whose records are all ``isSidechain``."""
    ours = [r for r in records if r.uuid is not None and r.isSidechain == sidechain]
    talk = [r for r in ours if r.type in ("user", "assistant")]
    if len(talk) > 1 and all(r.parent is None for r in ours):
        # Claude Code 1.0.x: every record has parentUuid null, so there is no chain to follow.
        counts["files without parent links (read in file order, as Claude Code 1.0.x writes them)"] += 1
        return [r for r in records if r.isSidechain == sidechain and not isinstance(r, OtherRecord)]
    by_uuid = {r.uuid: r for r in records if r.uuid is not None}
    before = {b.uuid: a for a, b in pairwise(ours)}  # file order, for a cut chain
    leaf = ours[-1] if ours else None
    keep: set[str] = set()
    node = leaf
    while node is not None and node.uuid is not None and node.uuid not in keep:
        keep.add(node.uuid)
        parent = node.parent
        nxt = by_uuid.get(parent) if parent is not None else None
        if parent is not None and nxt is None:
            nxt = before.get(node.uuid)
            counts[
                "parent missing (chain cut: went on from the record before it in the file)"
                if nxt is not None
                else "parent missing (chain cut)"
            ] += 1
        node = nxt
    # Claude Code writes one record per content block of a response, each chained to the one before, and
    # each tool result to its own call's record; the line from the last record passes through only one of
    # a response's parallel calls. So: a kept record's children that are blocks of the same response (same
    # message id) or tool results are on the line too, and so are theirs (to a fixpoint: a call's result
    # hangs off a call that hangs off the kept one). A child that is another response is a rewind.
    kept_ids = {
        r.message.id
        for r in records
        if r.uuid in keep and isinstance(r, AssistantRecord) and r.message.id is not None
    }
    grew = True
    while grew:
        grew = False
        for r in records:
            if r.uuid is None or r.uuid in keep or r.parent not in keep or r.isSidechain != sidechain:
                continue
            same_response = (
                isinstance(r, AssistantRecord) and r.message.id is not None and r.message.id in kept_ids
            )
            result = isinstance(r, UserRecord) and any(
                b.get("type") == "tool_result" for b in blocks(r.message.content)
            )
            # a bookkeeping record (progress, attachment) hanging off the line: a result may hang off it
            if same_response or result or isinstance(r, OtherRecord):
                keep.add(r.uuid)
                grew = True
    off = sum(
        1
        for r in by_uuid.values()
        if r.uuid not in keep and r.isSidechain == sidechain and r.type in ("user", "assistant")
    )
    if off:
        counts["messages off the main line (rewound or re-sent)"] += off
    return [r for r in records if r.uuid is not None and r.uuid in keep]


class _Builder:
    """Walks the main line, building turns; a /clear closes one session and opens the next."""

    def __init__(self, source: str, counts: Counts, *, sidechain: bool = False) -> None:
        self.source = source
        self.counts = counts
        self.sidechain = sidechain  # a subagent's own file: its records are the conversation
        self.parts: list[list[RecordedTurn]] = [[]]
        self.turn: RecordedTurn | None = None
        self.uses: dict[str, ToolUse] = {}
        self.system_turn = False  # answering a system-initiated turn: its messages are set aside

    def user(self, r: UserRecord) -> None:
        if r.isSidechain != self.sidechain:
            return
        if r.isCompactSummary:
            self.counts["compactions (summary not replayed)"] += 1
            return
        content = blocks(r.message.content)
        results = [b for b in content if b.get("type") == "tool_result"]
        if results:
            for b in results:
                self.result(b, r)
            return
        text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        if text.lstrip().startswith(INTERRUPTED):
            if self.turn is not None and not self.system_turn:
                self.turn.interrupted = True
                self.turn.touch(r.timestamp)
                self.counts["interrupted turns"] += 1
            return
        if r.isMeta:
            return
        kind = (r.origin or {}).get("kind")
        if r.promptSource == "system" or kind not in (None, "human"):
            self.counts["system-initiated turns (e.g. a background task finished)"] += 1
            self.system_turn = True
            return
        command = _COMMAND.search(text)
        if command is not None:
            name = command.group(1).strip()
            if name == "clear":
                self.counts["/clear (new session)"] += 1
                self.close()
            else:
                self.counts[f"slash commands (/{name})"] += 1
            return
        cleaned = _CONTEXT.sub("", text)
        if cleaned != text:
            if not cleaned.strip():
                return  # context only, nothing typed
            self.counts["IDE context or reminders taken out of prompts"] += 1
            text = cleaned.strip("\n")
        if _INJECTED.match(text):
            return
        images = sum(b.get("type") == "image" for b in content)
        if images:
            self.counts["images in prompts (dropped)"] += images
        if not text.strip():
            self.counts["prompts with no text"] += 1
            return
        self.end_turn()
        self.system_turn = False
        # A subagent's prompt was written by the main agent: no user entered it (no suggestion to take).
        source = "agent" if self.sidechain else r.promptSource
        self.turn = RecordedTurn(prompt=text, source=source, at=r.timestamp, line=r.line, uuid=r.uuid)

    def result(self, b: dict[str, Any], r: UserRecord) -> None:
        use = self.uses.get(str(b.get("tool_use_id")))
        if use is None:
            return  # the answer to a set-aside call (a system turn's, or off the main line)
        content = b.get("content")
        images = (
            sum(1 for x in content if isinstance(x, dict) and x.get("type") == "image")
            if isinstance(content, list)
            else 0
        )
        if images:
            self.counts["images in tool results"] += images
        error = bool(b.get("is_error"))
        if error:
            self.counts["tool errors"] += 1
        use.result = ToolResult(
            text=text_of(content), is_error=error, structured=r.toolUseResult, images=images, at=r.timestamp
        )
        if self.turn is not None:
            self.turn.touch(r.timestamp)

    def assistant(self, r: AssistantRecord) -> None:
        if r.isSidechain != self.sidechain:
            return
        if self.system_turn:
            self.counts["assistant messages of system-initiated turns"] += 1
            return
        if self.turn is None:
            self.counts["assistant messages before any prompt"] += 1
            return
        if r.isApiErrorMessage or r.message.model == "<synthetic>":
            self.counts["API error messages"] += 1
            return
        steps = self.turn.steps
        mid = r.message.id
        if not steps or mid is None or steps[-1].message_id != mid:
            steps.append(Step(message_id=mid))
        step = steps[-1]
        for b in r.message.content:
            kind = b.get("type")
            if kind == "text" and str(b.get("text", "")).strip():
                step.text.append(str(b["text"]))
            elif kind == "thinking" and str(b.get("thinking", "")).strip():
                step.thinking.append(str(b["thinking"]))
            elif kind == "tool_use":
                use = ToolUse(id=str(b.get("id")), name=str(b.get("name")), input=dict(b.get("input") or {}))
                step.tools.append(use)
                self.uses[use.id] = use
        step.at = r.timestamp
        self.turn.touch(r.timestamp)

    def system(self, r: SystemRecord) -> None:
        if r.subtype == "turn_duration" and self.turn is not None and not self.system_turn:
            self.turn.touch(r.timestamp)
        elif r.subtype == "compact_boundary":
            self.counts["compaction boundaries"] += 1

    def end_turn(self) -> None:
        if self.turn is None:
            return
        if not self.turn.steps:
            self.counts["prompts without an answer (dropped)"] += 1
        else:
            self.parts[-1].append(self.turn)
        self.turn = None

    def close(self) -> None:
        self.end_turn()
        self.system_turn = False
        self.parts.append([])


def is_subagent_file(path: Path, records: list[Record]) -> bool:
    """A subagent's own transcript: under ``subagents/`` or every conversational record a sidechain."""
    talk = [r for r in records if isinstance(r, UserRecord | AssistantRecord)]
    return path.parent.name == "subagents" or (bool(talk) and all(r.isSidechain for r in talk))


def sessions(path: Path, records: list[Record], counts: Counts) -> list[RecordedSession]:
    """The sessions (one per file, more after a /clear) with their turns. A subagent's own file is one
    session (a sidechain); sidechain records inside a main session's file are counted only."""
    sidechain = is_subagent_file(path, records)
    side = sum(r.isSidechain for r in records)
    if side and not sidechain:
        counts["subagent (sidechain) records inside a session file, not replayed"] += side
    chain = main_line(records, counts, sidechain=sidechain)
    b = _Builder(str(path), counts, sidechain=sidechain)
    for r in chain:
        if isinstance(r, UserRecord):
            b.user(r)
        elif isinstance(r, AssistantRecord):
            b.assistant(r)
        elif isinstance(r, SystemRecord):
            b.system(r)
    b.end_turn()
    first = next((r for r in records if isinstance(r, UserRecord | AssistantRecord)), None)
    cwd = next((r.cwd for r in chain if isinstance(r, UserRecord | AssistantRecord) and r.cwd), None)
    version = next(
        (r.version for r in chain if isinstance(r, UserRecord | AssistantRecord) and r.version), None
    )
    model = next(
        (
            r.message.model
            for r in chain
            if isinstance(r, AssistantRecord) and r.message.model not in (None, "<synthetic>")
        ),
        None,
    )
    sid = (first.sessionId if first is not None else None) or path.stem
    agent = None
    if sidechain:
        agent = next((r.agentId for r in records if r.agentId), None) or path.stem.removeprefix("agent-")
    return [
        RecordedSession(
            source=str(path),
            session_id=sid,
            cwd=cwd,
            version=version,
            model=model,
            turns=turns,
            part=i + 1,
            agent_id=agent,
        )
        for i, turns in enumerate(t for t in b.parts if t)
    ]


def step_text(step: Step) -> str | None:
    text = "\n\n".join(t.strip("\n") for t in step.text)
    return text if text.strip() else None
