"""What a hook is given: its event JSON on stdin, and its environment, in Claude Code 2.1.332's shapes.

Every event carries ``session_id``, ``transcript_path`` (:mod:`speculate.hooks.transcript`), ``cwd`` and
``hook_event_name``; every event but SessionStart, PreCompact and SessionEnd ``permission_mode``; every event after
the first prompt ``prompt_id`` (one per prompt, as Claude Code sends it). PostToolUse carries
``tool_response``, the tool's result as an object per tool (observed from Claude Code itself, see
docs/claude-code.md "Hooks"):

- Read ``{type: "text", file: {filePath, content, numLines, startLine, totalLines}}``
- Edit ``{filePath, oldString, newString, originalFile, structuredPatch, userModified, replaceAll}``
- Write ``{type: "create" | "update", filePath, content, structuredPatch, originalFile}``
- Bash ``{stdout, stderr, interrupted, isImage, noOutputExpected}`` (stderr merged into stdout, as there)
- Glob ``{filenames, durationMs, numFiles, truncated, totalMatches, countIsComplete}``
- Grep ``{mode, filenames, numFiles, totalFiles}``; content mode ``{mode, numFiles, filenames, content,
  numLines, totalLines}``, count mode ``{mode, numFiles, filenames, content, numMatches}``
- an MCP tool: the result's content as the model saw it.

speculate's tools return text; the objects are rebuilt here from the call's input, that text and the file
(read again for Read, and before and after the call for Edit and Write: ``originalFile`` and
``structuredPatch``), only when a PostToolUse hook will read them.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from speculate import FileSystem, __version__
from speculate.types import Block, text_of_result

NO_OUTPUT = "(no output)"  # speculate's Bash result for a command that printed nothing


def hook_env(*, project: str, session_id: str) -> dict[str, str]:
    """The variables a hook finds besides the session's (or, in a fork, the sandbox's) environment."""
    return {
        "CLAUDE_PROJECT_DIR": project,
        "CLAUDECODE": "1",
        "CLAUDE_CODE_SESSION_ID": session_id,
        "AI_AGENT": f"speculate_{__version__}",
    }


def common_fields(
    event: str, *, session_id: str, transcript_path: str, cwd: str, prompt_id: str | None, mode: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"session_id": session_id, "transcript_path": transcript_path, "cwd": cwd}
    if prompt_id is not None:
        out["prompt_id"] = prompt_id
    if event not in ("SessionStart", "SessionEnd", "PreCompact"):
        out["permission_mode"] = mode
    out["hook_event_name"] = event
    return out


async def file_text(fs: FileSystem, path: str) -> str | None:
    """A file's text as the tools read it, or None (missing, binary, outside the project)."""
    from speculate.tools.base import ToolError, run_io
    from speculate.tools.common import read_text, relative

    def read() -> str | None:
        try:
            return read_text(fs, relative(fs, path))
        except (ToolError, OSError):
            return None

    return await run_io(read)


def structured_patch(old: str, new: str) -> list[dict[str, Any]]:
    """Unified-diff hunks (3 lines of context) as Claude Code's ``structuredPatch`` lists them."""
    hunks: list[dict[str, Any]] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), n=3, lineterm=""):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
        if m:
            hunks.append(
                {
                    "oldStart": int(m[1]),
                    "oldLines": int(m[2] or 1),
                    "newStart": int(m[3]),
                    "newLines": int(m[4] or 1),
                    "lines": [],
                }
            )
        elif hunks and not line.startswith(("---", "+++")):
            hunks[-1]["lines"].append(line)
    return hunks


def tool_response(
    name: str, inp: dict[str, Any], result: Block, *, before: str | None, after: str | None, duration_ms: int
) -> Any:
    """The PostToolUse ``tool_response`` for a successful call (``before``/``after``: the file's text around
    an Edit or Write, or a Read's file)."""
    content = result.get("content", "")
    text = text_of_result(content)
    path = str(inp.get("file_path", ""))
    if name == "Read":
        lines = (after or "").split("\n")
        start = int(inp.get("offset") or 1)
        window = lines[start - 1 : start - 1 + int(inp.get("limit") or 2000)]
        return {
            "type": "text",
            "file": {
                "filePath": path,
                "content": "\n".join(window),
                "numLines": len(window),
                "startLine": start,
                "totalLines": len(lines),
            },
        }
    if name == "Edit":
        return {
            "filePath": path,
            "oldString": inp.get("old_string", ""),
            "newString": inp.get("new_string", ""),
            "originalFile": before,
            "structuredPatch": structured_patch(before or "", after or ""),
            "userModified": False,
            "replaceAll": bool(inp.get("replace_all", False)),
        }
    if name == "Write":
        created = before is None
        return {
            "type": "create" if created else "update",
            "filePath": path,
            "content": inp.get("content", ""),
            "structuredPatch": [] if created else structured_patch(before or "", after or ""),
            "originalFile": before,
            "userModified": False,
        }
    if name == "Bash":
        return {
            "stdout": "" if text == NO_OUTPUT else text,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
    if name == "Glob":
        return _glob(text, duration_ms)
    if name == "Grep":
        return _grep(text, str(inp.get("output_mode") or "files_with_matches"))
    return content  # an MCP tool: what the model saw


def _glob(text: str, duration_ms: int) -> dict[str, Any]:
    names = [] if text == "No files found" else text.split("\n")
    total = len(names)
    if names and (m := re.match(r"\(Results are truncated: showing \d+ of (\d+) files", names[-1])):
        names.pop()
        total = int(m[1])
    return {
        "filenames": names,
        "durationMs": duration_ms,
        "numFiles": len(names),
        "truncated": total > len(names),
        "totalMatches": total,
        "countIsComplete": True,
    }


def _grep(text: str, mode: str) -> dict[str, Any]:
    lines = [] if text in ("No files found", "No matches found") else text.split("\n")
    total = None  # before head_limit, where the output says so
    if lines and (m := re.fullmatch(r"\[showing first \d+ of (\d+) \w+;.*\]", lines[-1])):
        lines, total = lines[:-1], int(m[1])
    if mode == "files_with_matches":
        names = [ln for ln in lines if not re.fullmatch(r"Found \d+ files", ln)]
        return {"mode": mode, "filenames": names, "numFiles": len(names), "totalFiles": total or len(names)}
    if mode == "count":
        matches = 0
        if lines and (m := re.fullmatch(r"Found (\d+) matching lines in \d+ files", lines[0])):
            lines, matches = lines[1:], int(m[1])
        return {
            "mode": mode,
            "numFiles": len(lines),
            "filenames": [],
            "content": "\n".join(lines),
            "numMatches": matches,
        }
    return {
        "mode": mode,
        "numFiles": 0,
        "filenames": [],
        "content": "\n".join(lines),
        "numLines": len(lines),
        "totalLines": total or len(lines),
    }
