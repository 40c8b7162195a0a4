"""Budgets of what reaches the conversation: the tool results of one message, and a hook's output.

Tool results: all of a step's results together may hold :data:`MESSAGE_RESULT_BUDGET` characters.

A single tool already spills an output over its own limit (:func:`speculate.tools.common.spill`). Several
calls in one step (six large Reads in parallel) can still add up to more than a turn should carry, so the
largest results are saved to the spill directory and replaced by a preview of their first lines and the
path, largest first, until the message fits (seed 004: "Showing first 100 lines of 500" plus a path).

Hook output (:func:`cut`, applied by :mod:`speculate.hooks`): a hook's stdout becomes prompt context
(UserPromptSubmit) and its stderr a tool result or the next message (exit 2), so one that prints 10 MB
would make every later request "prompt is too long"; each is cut to :data:`HOOK_OUTPUT_BUDGET` characters
with a note. (Instruction files have their own budget: :mod:`speculate.instructions`.)
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from speculate.tools.base import ToolContext
from speculate.types import Block

MESSAGE_RESULT_BUDGET = 100_000  # characters of tool results in one message
PREVIEW_LINES = 100
HOOK_OUTPUT_BUDGET = 10_000  # characters of one hook's stdout (or stderr) that reach the conversation


def cut(text: str, budget: int, *, what: str) -> str:
    """``text`` at most ``budget`` characters (and a short note): its start, then a note saying how much of
    ``what`` was left out. Text within the budget is returned as it is."""
    if len(text) <= budget:
        return text
    return (
        text[:budget] + f"\n[{what} cut to its first {budget:,} of {len(text):,} characters: the rest is "
        "not sent to the model]"
    )


def preview(content: str, ctx: ToolContext, *, tool_use_id: str) -> str:
    """Save ``content`` in the spill directory; a preview of its first lines that names the file."""
    ctx.spill_dir.mkdir(parents=True, exist_ok=True)
    path = Path(ctx.spill_dir) / f"result-{tool_use_id[-12:] or uuid.uuid4().hex[:12]}.txt"
    path.write_text(content, encoding="utf-8")
    lines = content.splitlines()
    head = "\n".join(lines[:PREVIEW_LINES])[: MESSAGE_RESULT_BUDGET // 10]
    return (
        f"Showing first {min(PREVIEW_LINES, len(lines))} lines of {len(lines)} ({len(content)} chars; this "
        f"step's results were over the message budget). Full text saved to {path} (read it with Read "
        f"offset/limit).\n{head}"
    )


def fit_results(
    results: Sequence[Block], ctx: ToolContext, *, budget: int = MESSAGE_RESULT_BUDGET
) -> list[Block]:
    """``results`` (copies where changed) whose text contents add up to at most ``budget`` where possible. A
    result of several blocks (an MCP tool's) counts its text blocks; cut, they become one preview block
    before its other blocks (images)."""
    out = [dict(r) for r in results]
    sizes = {i: len(t) for i, r in enumerate(out) if (t := _text(r.get("content"))) is not None}
    total = sum(sizes.values())
    for i in sorted(sizes, key=lambda i: -sizes[i]):
        if total <= budget:
            break
        content = out[i]["content"]
        short = preview(_text(content) or "", ctx, tool_use_id=str(out[i].get("tool_use_id", "")))
        if len(short) >= sizes[i]:
            continue
        total -= sizes[i] - len(short)
        out[i]["content"] = (
            short
            if isinstance(content, str)
            else [{"type": "text", "text": short}, *(b for b in content if b.get("type") != "text")]
        )
    return out


def _text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return None
