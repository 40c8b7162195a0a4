"""Conversation types: Messages API messages and content blocks as plain JSON-shaped dicts.

Plain dicts (typed with TypedDicts) keep what we send byte-for-byte stable, so a fork can replay the
parent's prefix exactly; thinking blocks pass through untouched. Message content is always a list of
blocks (never a bare string) for the same reason.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[Block]  # a list: text and image blocks (MCP tools)
    is_error: NotRequired[bool]


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str


Block = dict[str, Any]  # any of the above, or a block type we pass through untouched


class Message(TypedDict):
    role: Literal["user", "assistant"]
    content: list[Block]


def text(s: str) -> Block:
    return {"type": "text", "text": s}


def user(*blocks: Block | str) -> Message:
    return {"role": "user", "content": [text(b) if isinstance(b, str) else b for b in blocks]}


def tool_result(tool_use_id: str, content: str | list[Block], *, is_error: bool = False) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def add_text(content: str | list[Block], more: str) -> str | list[Block]:
    """A tool result's content with ``more`` appended (a new paragraph, or a new text block)."""
    return f"{content}\n\n{more}" if isinstance(content, str) else [*content, text(more)]


def text_of_result(content: str | list[Block]) -> str:
    """A tool result's text (image blocks shown as a placeholder)."""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") if b.get("type") == "text" else f"[{b.get('type')}]" for b in content)


def tool_uses(message: Message) -> list[Block]:
    return [b for b in message["content"] if b.get("type") == "tool_use"]


def text_of(message: Message) -> str:
    return "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")


def is_prompt(message: Message) -> bool:
    """A user message the person typed (not a message carrying tool results)."""
    return message["role"] == "user" and not any(b.get("type") == "tool_result" for b in message["content"])
