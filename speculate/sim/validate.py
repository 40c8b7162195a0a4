"""Request validation with the API's error shape: each message names the offending field by its path.

Shape checks apply to every model; what one model accepts (thinking modes, forced tool use, sampling
parameters, assistant prefill, output limits) comes from its :class:`~speculate.sim.profiles.ModelProfile`.
"""

from __future__ import annotations

import re
from typing import Any

from speculate.errors import SpeculateError
from speculate.sim.profiles import ALL_THINKING, ModelProfile, find_profile

MESSAGE_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "tools", "tool_choice", "thinking", "stream", "metadata",
        "stop_sequences", "temperature", "top_k", "top_p", "cache_control", "service_tier", "container",
        "diagnostics", "inference_geo", "output_config", "speed", "user_profile_id", "workspace_id",
        "mcp_servers", "context_management",
    }
)  # fmt: skip
COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control"})
BLOCK_TYPES = ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking")
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


class RequestError(SpeculateError):
    """A request the API would refuse: HTTP status, error type and a message naming the field."""

    def __init__(self, message: str, *, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.kind, "message": self.message}}


def _need(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise RequestError(f"{path}{key}: Field required")
    return obj[key]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text_block(block: dict[str, Any], path: str) -> None:
    text = _need(block, "text", path + ".")
    if not isinstance(text, str):
        raise RequestError(f"{path}.text: Input should be a valid string")
    if not text:
        raise RequestError(f"{path}.text: text content blocks must be non-empty")


def _content(content: Any, path: str, role: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content and role == "user":
            raise RequestError(f"{path}: user messages must have non-empty content")
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise RequestError(f"{path}: Input should be a valid string or list of content blocks")
    for j, block in enumerate(content):
        where = f"{path}.{j}"
        if not isinstance(block, dict):
            raise RequestError(f"{where}: Input should be a valid dictionary")
        kind = _need(block, "type", where + ".")
        if kind not in BLOCK_TYPES:
            raise RequestError(
                f"{where}.type: Input tag {kind!r} does not match any of the expected tags: {BLOCK_TYPES}"
            )
        if kind == "text":
            _text_block(block, where)
        elif kind == "tool_use":
            if role != "assistant":
                raise RequestError(f"{where}: tool_use blocks may only appear in assistant messages")
            for key in ("id", "name"):
                if not isinstance(_need(block, key, where + "."), str):
                    raise RequestError(f"{where}.{key}: Input should be a valid string")
            if not isinstance(_need(block, "input", where + "."), dict):
                raise RequestError(f"{where}.input: Input should be a valid dictionary")
        elif kind in ("thinking", "redacted_thinking"):
            if role != "assistant":
                raise RequestError(f"{where}: {kind} blocks may only appear in assistant messages")
            for key in ("thinking", "signature") if kind == "thinking" else ("data",):
                if not isinstance(_need(block, key, where + "."), str):
                    raise RequestError(f"{where}.{key}: Input should be a valid string")
        elif kind == "tool_result":
            if role != "user":
                raise RequestError(f"{where}: tool_result blocks may only appear in user messages")
            if not isinstance(_need(block, "tool_use_id", where + "."), str):
                raise RequestError(f"{where}.tool_use_id: Input should be a valid string")
            inner = block.get("content", "")
            if not isinstance(inner, str | list):
                raise RequestError(f"{where}.content: Input should be a valid string or list")
            if "is_error" in block and not isinstance(block["is_error"], bool):
                raise RequestError(f"{where}.is_error: Input should be a valid boolean")
    return content


def _messages(messages: Any, *, prefill: bool = True) -> None:
    if not isinstance(messages, list):
        raise RequestError("messages: Input should be a valid list")
    if not messages:
        raise RequestError("messages: at least one message is required")
    pending: list[str] = []  # tool_use ids of the previous assistant message
    for i, message in enumerate(messages):
        path = f"messages.{i}"
        if not isinstance(message, dict):
            raise RequestError(f"{path}: Input should be a valid dictionary")
        role = _need(message, "role", path + ".")
        if role not in ("user", "assistant", "system"):
            raise RequestError(f"{path}.role: Input should be 'user', 'assistant' or 'system'")
        blocks = _content(_need(message, "content", path + "."), f"{path}.content", role)
        if role == "system":
            # Mid-conversation system turns (Claude Code sends one): text only.
            for j, block in enumerate(blocks):
                if block.get("type") != "text":
                    raise RequestError(
                        f"{path}.content.{j}.type: system messages may only contain text blocks"
                    )
        results = [(j, b["tool_use_id"]) for j, b in enumerate(blocks) if b.get("type") == "tool_result"]
        if pending:
            answered = {tid for _, tid in results} if role == "user" else set()
            missing = [tid for tid in pending if tid not in answered]
            if missing:
                raise RequestError(
                    f"{path}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
        for j, tid in results:
            if tid not in pending:
                raise RequestError(
                    f"{path}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. Each "
                    "`tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
        pending = [b["id"] for b in blocks if b.get("type") == "tool_use"] if role == "assistant" else []
    if messages[-1].get("role") == "assistant" and not prefill:
        raise RequestError(
            "This model does not support assistant message prefill. "
            "The conversation must end with a user message."
        )


def _tools(tools: Any, tool_choice: Any) -> None:
    names: list[str] = []
    if tools is not None:
        if not isinstance(tools, list):
            raise RequestError("tools: Input should be a valid list")
        for i, tool in enumerate(tools):
            path = f"tools.{i}"
            if not isinstance(tool, dict):
                raise RequestError(f"{path}: Input should be a valid dictionary")
            name = _need(tool, "name", path + ".")
            if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
                raise RequestError(f"{path}.name: String should match pattern '{TOOL_NAME_RE.pattern}'")
            if tool.get("type", "custom") == "custom":
                schema = _need(tool, "input_schema", path + ".")
                if not isinstance(schema, dict) or schema.get("type") != "object":
                    raise RequestError(f"{path}.input_schema.type: Input should be 'object'")
            names.append(name)
        if len(set(names)) != len(names):
            raise RequestError("tools: Tool names must be unique.")
    if tool_choice is not None:
        if not isinstance(tool_choice, dict) or tool_choice.get("type") not in (
            "auto",
            "any",
            "tool",
            "none",
        ):
            raise RequestError("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
        if tool_choice["type"] == "tool":
            name = _need(tool_choice, "name", "tool_choice.")
            if name not in names:
                raise RequestError(f"tool_choice.name: Tool '{name}' not found in the provided tools")


def validate(body: Any, profiles: tuple[ModelProfile, ...], *, count_only: bool = False) -> ModelProfile:
    """Check a /v1/messages (or count_tokens) body; returns the model profile or raises RequestError."""
    if not isinstance(body, dict):
        raise RequestError("body: Input should be a valid dictionary")
    allowed = COUNT_FIELDS if count_only else MESSAGE_FIELDS
    for key in body:
        if key not in allowed:
            raise RequestError(f"{key}: Extra inputs are not permitted")
    model = _need(body, "model", "")
    if not isinstance(model, str):
        raise RequestError("model: Input should be a valid string")
    profile = find_profile(model, profiles)
    if profile is None:
        raise RequestError(f"model: {model}", status=404, kind="not_found_error")
    max_tokens = None
    if not count_only:
        max_tokens = _need(body, "max_tokens", "")
        if not _is_int(max_tokens) or max_tokens < 1:
            raise RequestError("max_tokens: Input should be an integer greater than or equal to 1")
        if max_tokens > profile.max_output_tokens:
            raise RequestError(
                f"max_tokens: {max_tokens} > {profile.max_output_tokens}, which is the maximum allowed number "
                f"of output tokens for {model}"
            )
        if "stream" in body and not isinstance(body["stream"], bool):
            raise RequestError("stream: Input should be a valid boolean")
        _sampling(body, profile)
        _stop_sequences(body.get("stop_sequences"))
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise RequestError("system: Input should be a valid string or list of text blocks")
        for i, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise RequestError(f"system.{i}.type: Input should be 'text'")
            _text_block(block, f"system.{i}")
    _messages(_need(body, "messages", ""), prefill=profile.prefill or count_only)
    _tools(body.get("tools"), body.get("tool_choice"))
    _thinking(body.get("thinking"), profile, max_tokens)
    forced = isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("type") in ("any", "tool")
    if forced and not profile.forced_tool_choice:
        raise RequestError('tool_choice: type "tool" and "any" are not supported for this model.')
    if forced and thinking_on(body, profile):
        raise RequestError("Thinking may not be enabled when tool_choice forces tool use.")
    return profile


def thinking_on(body: dict[str, Any], profile: ModelProfile) -> bool:
    """Does this request run with thinking (explicitly, or by the model's default)?"""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict):
        return profile.thinking_default
    return thinking.get("type") in ("enabled", "adaptive")


def _thinking(thinking: Any, profile: ModelProfile, max_tokens: int | None) -> None:
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ALL_THINKING:
        raise RequestError("thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'")
    if kind not in profile.thinking_modes:
        if kind == "adaptive":
            raise RequestError("thinking.type: adaptive thinking is not supported on this model")
        raise RequestError(
            f'"thinking.type.{kind}" is not supported for this model. Use "thinking.type.adaptive" and '
            '"output_config.effort" to control thinking behavior.'
        )
    if kind == "enabled":
        budget = _need(thinking, "budget_tokens", "thinking.")
        if not _is_int(budget) or budget < 1024:
            raise RequestError("thinking.budget_tokens: Input should be greater than or equal to 1024")
        if max_tokens is not None and budget >= max_tokens:
            raise RequestError(
                "thinking.budget_tokens: `max_tokens` must be greater than `thinking.budget_tokens`"
            )


def _sampling(body: dict[str, Any], profile: ModelProfile) -> None:
    temperature, top_p, top_k = body.get("temperature"), body.get("top_p"), body.get("top_k")
    if temperature is not None and not (isinstance(temperature, int | float) and 0 <= temperature <= 1):
        raise RequestError("temperature: Input should be between 0 and 1")
    if top_p is not None and not (isinstance(top_p, int | float) and 0 <= top_p <= 1):
        raise RequestError("top_p: Input should be between 0 and 1")
    if top_k is not None and not (_is_int(top_k) and top_k >= 0):
        raise RequestError("top_k: Input should be a non-negative integer")
    if profile.sampling:
        return
    # Models after Opus 4.6 keep only the defaults, accepted for backwards compatibility.
    if temperature is not None and temperature != 1:
        raise RequestError(
            "temperature: this model does not support setting temperature (only 1.0 is accepted)"
        )
    if top_p is not None and top_p < 0.99:
        raise RequestError(
            "top_p: this model does not support setting top_p (only values >= 0.99 are accepted)"
        )
    if top_k is not None:
        raise RequestError("top_k: this model does not accept top_k")


def _stop_sequences(stops: Any) -> None:
    if stops is None:
        return
    if not isinstance(stops, list):
        raise RequestError("stop_sequences: Input should be a valid list")
    for i, stop in enumerate(stops):
        if not isinstance(stop, str) or not stop.strip():
            raise RequestError(f"stop_sequences.{i}: each stop sequence must contain non-whitespace")
