"""What of a fork's messages is injected on acceptance."""

from __future__ import annotations

import copy

from speculate.types import Message


def completed_part(messages: list[Message], *, complete: bool) -> list[Message]:
    """The fork's messages (from its user prompt on) that can be injected into the main conversation.

    A complete fork is injected whole. A fork stopped at a boundary (or interrupted) loses its trailing
    assistant message (interrupted text, tool calls that never ran), the tool calls of the last exchange
    that have no successful result, and their failed results, so the normal loop takes over from a valid
    conversation and proposes the boundary action again under the normal permission rules.
    """
    out = copy.deepcopy(messages)
    if complete:
        return out
    if len(out) > 1 and out[-1]["role"] == "assistant":
        out.pop()
    if len(out) >= 2 and out[-1]["role"] == "user" and out[-2]["role"] == "assistant":
        results = [b for b in out[-1]["content"] if b.get("type") == "tool_result"]
        ok = {b["tool_use_id"] for b in results if not b.get("is_error")}
        asst, res = out[-2], out[-1]
        asst["content"] = [b for b in asst["content"] if b.get("type") != "tool_use" or b["id"] in ok]
        res["content"] = [
            b for b in res["content"] if b.get("type") != "tool_result" or b["tool_use_id"] in ok
        ]
        if not res["content"]:
            out.pop()
            if not any(b.get("type") == "tool_use" for b in asst["content"]):
                out.pop()  # trailing assistant text with nothing after it
    return out
