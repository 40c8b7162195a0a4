"""Text-based tool calling (seed 001): tools, calls and results travel as tagged text, for a backend whose
interface takes prompts but not the API's ``tools`` parameter (the ``claude`` CLI, :mod:`.claude_cli`).

- Tool definitions: JSON in a ``<tools>`` block inside a ``<system-reminder>``, with how to call them.
- Calls: the model answers with ``<tool_use>{"name": ..., "id": ..., "input": {...}}</tool_use>`` blocks.
  :func:`extract` skips what is not JSON, checks names against the offered tools and inputs against the
  tools' pydantic models; the calls it drops are reported (:func:`feedback`) on the next turn.
- Results: ``<tool_result>`` blocks holding JSON. User text is wrapped in ``<user>``, except content that
  starts with ``<system-reminder`` (hook output, context), which stays outside.
- Orphaned calls (no result, after an interruption) get a synthetic error result when rendered.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from speculate.types import Block, Message

TOOL_USE_RE = re.compile(r"<tool_use>(.*?)</tool_use>", re.DOTALL)
ORPHANED = "Error: this tool call was interrupted before it produced a result."
INSTRUCTIONS = """You can call the tools below. To call one, write a block like this in your answer, one per call:
<tool_use>
{"name": "Read", "id": "call_1", "input": {"file_path": "/abs/path"}}
</tool_use>
Use only these tool names; the input must match the tool's input_schema. After your calls, stop and wait:
each result comes back in a <tool_result> block with the same id. When you need no tool, answer in plain text."""


def tools_reminder(tools: Sequence[Mapping[str, Any]]) -> str:
    defs = [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            "input_schema": t.get("input_schema", {}),
        }
        for t in tools
    ]
    return f"<system-reminder>\n{INSTRUCTIONS}\n<tools>\n{json.dumps(defs)}\n</tools>\n</system-reminder>"


def _result_json(block: Block) -> str:
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    out: dict[str, Any] = {"tool_use_id": block.get("tool_use_id"), "content": content}
    if block.get("is_error"):
        out["is_error"] = True
    return f"<tool_result>\n{json.dumps(out)}\n</tool_result>"


def render_user(content: Sequence[Block], *, missing: Sequence[str] = ()) -> str:
    """One user message as text: synthetic results for ``missing`` call ids first, then its blocks."""
    parts = [_result_json({"tool_use_id": i, "content": ORPHANED, "is_error": True}) for i in missing]
    for b in content:
        if b.get("type") == "tool_result":
            parts.append(_result_json(b))
        elif b.get("type") == "text":
            text = b["text"]
            parts.append(text if text.lstrip().startswith("<system-reminder") else f"<user>\n{text}\n</user>")
    return "\n".join(parts)


def render_assistant(message: Message) -> str:
    parts = []
    for b in message["content"]:
        if b.get("type") == "text":
            parts.append(b["text"])
        elif b.get("type") == "tool_use":
            call = {"name": b["name"], "id": b["id"], "input": b.get("input", {})}
            parts.append(f"<tool_use>\n{json.dumps(call)}\n</tool_use>")
    return "\n".join(parts)


def render(messages: Sequence[Message], *, before: Message | None = None) -> str:
    """Messages as one prompt (``<assistant>`` tags for earlier answers); ``before``: the message preceding
    them (the last one the resumed session holds), whose calls may need results."""
    parts = []
    prev = before
    for m in messages:
        if m["role"] == "user":
            parts.append(render_user(m["content"], missing=orphaned(prev, m)))
        else:
            parts.append(f"<assistant>\n{render_assistant(m)}\n</assistant>")
        prev = m
    return "\n".join(p for p in parts if p)


def orphaned(assistant: Message | None, reply: Message) -> list[str]:
    """Ids of the calls in ``assistant`` that ``reply`` holds no result for."""
    if assistant is None or assistant["role"] != "assistant":
        return []
    answered = {b.get("tool_use_id") for b in reply["content"] if b.get("type") == "tool_result"}
    return [b["id"] for b in assistant["content"] if b.get("type") == "tool_use" and b["id"] not in answered]


@dataclass
class Extracted:
    text: str  # the answer without its tool_use blocks
    uses: list[Block] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # why each dropped call was dropped, for the model


def extract(text: str, validators: Mapping[str, type[BaseModel] | None]) -> Extracted:
    """The valid calls in ``text``; ``validators``: offered tool name -> its input model (None: name only)."""
    out = Extracted(TOOL_USE_RE.sub("", text).strip())
    for n, body in enumerate(TOOL_USE_RE.findall(text)):
        try:
            call = json.loads(body)
        except json.JSONDecodeError:
            continue  # prose between the tags (an example, documentation), not a call
        if not isinstance(call, dict):
            continue
        name, inp = call.get("name"), call.get("input", call.get("arguments", {}))
        if not isinstance(name, str) or name not in validators:
            out.invalid.append(f"{name!r} is not one of the offered tools ({', '.join(validators)})")
            continue
        if not isinstance(inp, dict):
            out.invalid.append(f"{name}: input must be a JSON object, got {type(inp).__name__}")
            continue
        model = validators[name]
        if model is not None:
            try:
                model.model_validate(inp)
            except ValidationError as e:
                errors = "; ".join(
                    f"{'.'.join(map(str, x['loc'])) or 'input'}: {x['msg']}" for x in e.errors()
                )
                out.invalid.append(f"{name}: invalid input ({errors})")
                continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = "toolu_txt_" + hashlib.sha256(f"{n}:{body}".encode()).hexdigest()[:20]
        out.uses.append({"type": "tool_use", "id": call_id, "name": name, "input": inp})
    return out


def feedback(invalid: Sequence[str]) -> str:
    """The reminder sent with the next turn about the calls :func:`extract` dropped."""
    lines = "\n".join(f"- {x}" for x in invalid)
    return (
        f"<system-reminder>\nThese tool calls in your last answer were invalid and were not run:\n{lines}\n"
        "Call only the offered tools, with inputs that match their schemas.\n</system-reminder>"
    )
