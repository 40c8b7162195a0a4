"""Hand-made Claude Code transcripts for the importer's tests, record by record in the shapes Claude Code 2.1.332
writes (observed from the CLI against the simulator; tests/importers/data holds real excerpts): a prompt is a
``user`` record with ``promptSource``; an assistant message is one ``assistant`` record per content block
sharing ``message.id``; a tool result is a ``user`` record with a ``tool_result`` block and ``toolUseResult``;
every conversational record chains to the previous one by ``parentUuid``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CWD = "/work/proj"
SESSION = "5e55104e-0000-4000-8000-000000000001"
T0 = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)


class Transcript:
    def __init__(self, *, cwd: str = CWD, session: str = SESSION) -> None:
        self.cwd = cwd
        self.session = session
        self.records: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.clock = T0
        self.n = 0

    def _uuid(self) -> str:
        self.n += 1
        return f"00000000-0000-4000-8000-{self.n:012d}"

    def at(self, seconds: float) -> Transcript:
        """Move the clock ``seconds`` on (the next records are written then)."""
        self.clock += timedelta(seconds=seconds)
        return self

    def _ts(self) -> str:
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def add(self, rec: dict[str, Any], *, chain: bool = True, parent: str | None = ...) -> str:  # type: ignore[assignment]
        """Append a record; conversational ones get uuid, parentUuid, timestamp and the session fields."""
        if chain:
            uid = self._uuid()
            base = {"parentUuid": self.parent if parent is ... else parent, "isSidechain": False}
            rec = {
                **base,
                **rec,
                "uuid": uid,
                "timestamp": self._ts(),
                "userType": "external",
                "entrypoint": "cli",
                "cwd": self.cwd,
                "sessionId": self.session,
                "version": "2.1.332",
                "gitBranch": "HEAD",
            }
            self.parent = uid
        self.records.append(rec)
        return rec.get("uuid", "")

    def prompt(self, text: str, source: str = "typed", **extra: Any) -> str:
        self.add(
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": self._ts(),
                "sessionId": self.session,
                "content": text,
            },
            chain=False,
        )
        return self.add(
            {
                "promptId": "p",
                "type": "user",
                "message": {"role": "user", "content": text},
                "permissionMode": "acceptEdits",
                "origin": {"kind": "human"},
                "promptSource": source,
                "turnOrigin": "human",
                **extra,
            }
        )

    def message(
        self,
        msg_id: str,
        *blocks: dict[str, Any],
        model: str = "claude-opus-5-5",
        stop: str = "end_turn",
        **extra: Any,
    ) -> None:
        """One assistant message: a record per block (as Claude Code writes them)."""
        for i, b in enumerate(blocks):
            self.add(
                {
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [b],
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 0, "output_tokens": 10},
                    },
                    "apiBlockIndex": i,
                    "requestId": f"req_{msg_id}",
                    "type": "assistant",
                    **extra,
                }
            )

    def result(
        self, tool_id: str, content: Any, structured: Any, *, error: bool = False, parent: str | None = ...
    ) -> str:  # type: ignore[assignment]
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if error:
            block["is_error"] = True
        return self.add(
            {
                "promptId": "p",
                "type": "user",
                "message": {"role": "user", "content": [block]},
                "toolUseResult": structured,
            },
            parent=parent,
        )

    def turn_end(self, ms: int = 1000) -> None:
        self.add(
            {
                "type": "system",
                "subtype": "turn_duration",
                "durationMs": ms,
                "messageCount": 3,
                "isMeta": False,
            }
        )

    def bookkeeping(self) -> None:
        self.add(
            {"type": "last-prompt", "lastPrompt": "x", "leafUuid": self.parent, "sessionId": self.session},
            chain=False,
        )
        self.add({"type": "cost-state", "sessionId": self.session, "totalCostUSD": 0.1}, chain=False)

    def write(self, path: Path, *, tail: str = "") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records) + tail, encoding="utf-8")
        return path


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(tool_id: str, name: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": inp}


def read_result(path: str, content: str) -> dict[str, Any]:
    n = content.count("\n") + 1
    return {
        "type": "text",
        "file": {"filePath": path, "content": content, "numLines": n, "startLine": 1, "totalLines": n},
    }


def numbered(content: str) -> str:
    return "\n".join(f"{i}\t{line}" for i, line in enumerate(content.split("\n"), start=1))


def read_turn(t: Transcript, msg: str, tool_id: str, rel: str, content: str) -> None:
    """An assistant message with one Read of ``rel``, and its result as Claude Code records it."""
    path = f"{t.cwd}/{rel}"
    t.message(msg, use(tool_id, "Read", file_path=path), stop="tool_use")
    t.at(0.1).result(tool_id, numbered(content), read_result(path, content))


def edit_turn(t: Transcript, msg: str, tool_id: str, rel: str, before: str, old: str, new: str) -> None:
    path = f"{t.cwd}/{rel}"
    t.message(
        msg,
        use(tool_id, "Edit", file_path=path, old_string=old, new_string=new, replace_all=False),
        stop="tool_use",
    )
    t.at(0.1).result(
        tool_id,
        f"The file {path} has been updated successfully.",
        {
            "filePath": path,
            "oldString": old,
            "newString": new,
            "originalFile": before,
            "structuredPatch": [],
            "userModified": False,
            "replaceAll": False,
        },
    )


def bash_turn(t: Transcript, msg: str, tool_id: str, command: str, stdout: str, code: int = 0) -> None:
    t.message(msg, use(tool_id, "Bash", command=command, description="run it"), stop="tool_use")
    if code:
        t.at(0.5).result(
            tool_id, f"Exit code {code}\n{stdout}", f"Error: Exit code {code}\n{stdout}", error=True
        )
    else:
        t.at(0.5).result(
            tool_id,
            stdout,
            {
                "stdout": stdout,
                "stderr": "",
                "interrupted": False,
                "isImage": False,
                "noOutputExpected": False,
            },
        )
