"""The conversation as a hook reads it through ``transcript_path``: JSONL in Claude Code's own shape.

speculate's session transcript (:mod:`speculate.transcript`) records events (messages, usage, timings) in its
own format. Hooks written for Claude Code read ``transcript_path`` as Claude Code writes it: one JSON object
per line, ``{"type": "user" | "assistant", "message": {"role", "content"}, "uuid", "parentUuid",
"sessionId", "timestamp", "cwd", "isSidechain", "version"}``. This module writes that, for a session with
hooks, before each hook runs (so a hook sees every message up to its event).

Where: ``$XDG_DATA_HOME/speculate/transcripts`` (else ``~/.local/share/speculate/transcripts``)
``/<project path, each non-alphanumeric character a dash>/<session id>.jsonl``, as Claude Code keeps
``~/.claude/projects/<slug>/<session id>.jsonl``; not Claude Code's own directory, whose ``--resume`` would
list speculate's sessions. A speculative fork writes its own copy (the parent's lines, then its own) in
``<session id>/speculation-N.jsonl`` beside it (the last two kept), removed when the session closes: its
hooks run in the sandbox, which sees the home read-only (not /tmp, which is private there: with the data
directory under /tmp a fork's hook cannot read its transcript). Message contents are the
Messages API blocks as sent (a typed prompt is a list of text blocks, never a bare string).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from speculate import __version__
from speculate.types import Message


def default_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "speculate" / "transcripts"


def slug(project: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", str(project))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class HookTranscript:
    """Appends the conversation's new messages to ``path`` on :meth:`sync`."""

    def __init__(self, path: Path, *, session_id: str, cwd: Path) -> None:
        self.path, self.session_id, self.cwd = path, session_id, cwd
        self.written = 0  # messages of the conversation already on file
        self.parent: str | None = None  # uuid of the last line
        self.forks = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    @classmethod
    def for_session(cls, project: Path, session_id: str, *, base: Path | None = None) -> HookTranscript:
        return cls(
            (base or default_dir()) / slug(project) / f"{session_id}.jsonl",
            session_id=session_id,
            cwd=project,
        )

    def sync(self, messages: list[Message]) -> None:
        """Write the messages not yet on file. A shorter conversation (compacted, cleared) starts again after
        a ``compact_boundary`` line, as Claude Code marks a compaction."""
        if len(messages) < self.written:
            self._line({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"})
            self.written = 0
        for m in messages[self.written :]:
            self._line({"type": m["role"], "message": {"role": m["role"], "content": m["content"]}})
        self.written = len(messages)

    def fork(self) -> HookTranscript:
        """A copy for a speculative fork: the lines so far, in the session's fork directory."""
        self.forks += 1
        path = self.path.with_suffix("") / f"speculation-{self.forks}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        # One fork runs at a time (and the one it may follow): older copies are of no use to any hook.
        (path.parent / f"speculation-{self.forks - 2}.jsonl").unlink(missing_ok=True)
        shutil.copyfile(self.path, path)
        child = HookTranscript(path, session_id=self.session_id, cwd=self.cwd)
        child.written, child.parent = self.written, self.parent
        return child

    def remove_forks(self) -> None:
        shutil.rmtree(self.path.with_suffix(""), ignore_errors=True)

    def _line(self, record: dict[str, Any]) -> None:
        me = str(uuid.uuid4())
        line = {
            "parentUuid": self.parent,
            "isSidechain": False,
            **record,
            "uuid": me,
            "timestamp": _now(),
            "sessionId": self.session_id,
            "cwd": str(self.cwd),
            "version": f"speculate {__version__}",
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.parent = me
