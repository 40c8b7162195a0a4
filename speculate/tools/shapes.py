"""How the built-in tools' calls look to others, in Claude Code 2.1.332's shapes: a PostToolUse hook's
``tool_response`` per tool (observed from Claude Code itself, see docs/claude-code.md "Hooks"), and what a
file-writing tool changes, for the REPL. Each tool class points at its functions here
(:meth:`speculate.tools.base.Tool.hook_response`, ``edited``, ``change_lines``); a new tool may keep its own
in its module instead (:mod:`speculate.tools.notebook`).

- Read ``{type: "text", file: {filePath, content, numLines, startLine, totalLines}}``
- Edit ``{filePath, oldString, newString, originalFile, structuredPatch, userModified, replaceAll}``
- Write ``{type: "create" | "update", filePath, content, structuredPatch, originalFile}``
- Bash ``{stdout, stderr, interrupted, isImage, noOutputExpected}`` (stderr merged into stdout, as there)
- Glob ``{filenames, durationMs, numFiles, truncated, totalMatches, countIsComplete}``
- Grep ``{mode, filenames, numFiles, totalFiles}``; content mode ``{mode, numFiles, filenames, content,
  numLines, totalLines}``, count mode ``{mode, numFiles, filenames, content, numMatches}``

speculate's tools return text; the objects are rebuilt from the call's input, that text and the file (read
again for Read, and before and after the call for Edit and Write: ``originalFile`` and ``structuredPatch``).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from speculate.types import text_of_result

NO_OUTPUT = "(no output)"  # speculate's Bash result for a command that printed nothing


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


def snippet_diff(old: str, new: str) -> list[str]:
    """``old`` → ``new`` as diff lines without headers (an Edit's strings, not the whole file)."""
    body = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3))[2:]
    return [ln for ln in body if not ln.startswith("@@")]


# -- hook responses (the signature of Tool.hook_response) ---------------------------------------------------------------------------------------


def read_response(
    inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
) -> dict[str, Any]:
    lines = (after or "").split("\n")
    start = int(inp.get("offset") or 1)
    window = lines[start - 1 : start - 1 + int(inp.get("limit") or 2000)]
    return {
        "type": "text",
        "file": {
            "filePath": str(inp.get("file_path", "")),
            "content": "\n".join(window),
            "numLines": len(window),
            "startLine": start,
            "totalLines": len(lines),
        },
    }


def edit_response(
    inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
) -> dict[str, Any]:
    return {
        "filePath": str(inp.get("file_path", "")),
        "oldString": inp.get("old_string", ""),
        "newString": inp.get("new_string", ""),
        "originalFile": before,
        "structuredPatch": structured_patch(before or "", after or ""),
        "userModified": False,
        "replaceAll": bool(inp.get("replace_all", False)),
    }


def write_response(
    inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
) -> dict[str, Any]:
    created = before is None
    return {
        "type": "create" if created else "update",
        "filePath": str(inp.get("file_path", "")),
        "content": inp.get("content", ""),
        "structuredPatch": [] if created else structured_patch(before or "", after or ""),
        "originalFile": before,
        "userModified": False,
    }


def bash_response(
    inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
) -> dict[str, Any]:
    text = text_of_result(content)
    return {
        "stdout": "" if text == NO_OUTPUT else text,
        "stderr": "",
        "interrupted": False,
        "isImage": False,
        "noOutputExpected": False,
    }


def glob_response(
    inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
) -> dict[str, Any]:
    text = text_of_result(content)
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


def grep_response(
    inp: dict[str, Any], content: Any, *, before: str | None, after: str | None, duration_ms: int
) -> dict[str, Any]:
    text = text_of_result(content)
    mode = str(inp.get("output_mode") or "files_with_matches")
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


# -- what a writing tool changes (the REPL) ---------------------------------------------------------------


def edit_edited(inp: dict[str, Any], current: str | None) -> str | None:
    """The file after an Edit, given its text now (None when the old string is not there)."""
    if current is None:
        return None
    old, new = str(inp.get("old_string", "")), str(inp.get("new_string", ""))
    if old and old in current:
        return current.replace(old, new) if inp.get("replace_all") else current.replace(old, new, 1)
    return None


def edit_change_lines(inp: dict[str, Any]) -> list[str]:
    return snippet_diff(str(inp.get("old_string", "")), str(inp.get("new_string", "")))


def write_edited(inp: dict[str, Any], current: str | None) -> str | None:
    return str(inp.get("content", ""))


def write_change_lines(inp: dict[str, Any]) -> list[str]:
    return [f"+{ln}" for ln in str(inp.get("content", "")).splitlines()]
