"""Request validation with the API's error shape: each message names the offending field by its path.

The shape (types, required fields, block and tool tags) is checked by pydantic over the SDK's own request
types (:mod:`speculate.sim.request_shape`). By hand, here: the fields the API takes beyond the SDK's types,
what types cannot say (which role carries which block, tool_use/tool_result pairing, non-empty text, unique
tool names, ranges), and what one model accepts (thinking modes, forced tool use, sampling parameters,
assistant prefill, output limits), from its :class:`~speculate.sim.profiles.ModelProfile`.
"""

from __future__ import annotations

import re
from typing import Any

from speculate.errors import SpeculateError
from speculate.sim.profiles import ALL_THINKING, ModelProfile, find_profile
from speculate.sim.request_shape import shape_problem

MESSAGE_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "tools", "tool_choice", "thinking", "stream", "metadata",
        "stop_sequences", "temperature", "top_k", "top_p", "cache_control", "service_tier", "container",
        "diagnostics", "inference_geo", "output_config", "speed", "user_profile_id", "workspace_id",
        "mcp_servers", "context_management",
    }
)  # fmt: skip
COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control"})
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
    if not block["text"]:
        raise RequestError(f"{path}.text: text content blocks must be non-empty")


def _content(content: Any, path: str, role: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content and role == "user":
            raise RequestError(f"{path}: user messages must have non-empty content")
        return [{"type": "text", "text": content}] if content else []
    for j, block in enumerate(content):
        where, kind = f"{path}.{j}", block["type"]
        if kind == "text":
            _text_block(block, where)
        elif kind in ("tool_use", "thinking", "redacted_thinking") and role != "assistant":
            raise RequestError(f"{where}: {kind} blocks may only appear in assistant messages")
        elif kind == "tool_result" and role != "user":
            raise RequestError(f"{where}: tool_result blocks may only appear in user messages")
    return content


def _messages(messages: list[dict[str, Any]], *, prefill: bool = True) -> None:
    if not messages:
        raise RequestError("messages: at least one message is required")
    pending: list[str] = []  # tool_use ids of the previous assistant message
    for i, message in enumerate(messages):
        path, role = f"messages.{i}", message["role"]
        # (A mid-conversation system turn, which Claude Code sends, is text only: the SDK's types say so.)
        blocks = _content(message["content"], f"{path}.content", role)
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


def _tools(tools: list[dict[str, Any]] | None, tool_choice: dict[str, Any] | None) -> None:
    names: list[str] = []
    for i, tool in enumerate(tools or []):
        name = tool["name"]
        if not TOOL_NAME_RE.match(name):
            raise RequestError(f"tools.{i}.name: String should match pattern '{TOOL_NAME_RE.pattern}'")
        if tool.get("type", "custom") == "custom" and tool["input_schema"].get("type") != "object":
            raise RequestError(f"tools.{i}.input_schema.type: Input should be 'object'")
        names.append(name)
    if len(set(names)) != len(names):
        raise RequestError("tools: Tool names must be unique.")
    if tool_choice is not None and tool_choice["type"] == "tool" and tool_choice["name"] not in names:
        raise RequestError(f"tool_choice.name: Tool '{tool_choice['name']}' not found in the provided tools")


def validate(body: Any, profiles: tuple[ModelProfile, ...], *, count_only: bool = False) -> ModelProfile:
    """Check a /v1/messages (or count_tokens) body; returns the model profile or raises RequestError."""
    if not isinstance(body, dict):
        raise RequestError("body: Input should be a valid dictionary")
    allowed = COUNT_FIELDS if count_only else MESSAGE_FIELDS
    for key in body:
        if key not in allowed:
            raise RequestError(f"{key}: Extra inputs are not permitted")
    if (bad := shape_problem(body, count_only=count_only)) is not None:
        raise RequestError(bad)
    model = body["model"]
    profile = find_profile(model, profiles)
    if profile is None:
        raise RequestError(f"model: {model}", status=404, kind="not_found_error")
    max_tokens = None
    if not count_only:
        max_tokens = body["max_tokens"]
        if max_tokens < 1:
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
    for i, block in enumerate(system if isinstance(system, list) else []):
        _text_block(block, f"system.{i}")
    _messages(body["messages"], prefill=profile.prefill or count_only)
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
    kind = thinking["type"]
    if kind not in ALL_THINKING:
        raise RequestError(f"thinking.type: Input should be {', '.join(repr(m) for m in ALL_THINKING)}")
    if kind not in profile.thinking_modes:
        if kind == "adaptive":
            raise RequestError("thinking.type: adaptive thinking is not supported on this model")
        raise RequestError(
            f'"thinking.type.{kind}" is not supported for this model. Use "thinking.type.adaptive" and '
            '"output_config.effort" to control thinking behavior.'
        )
    if kind == "enabled":
        budget = thinking["budget_tokens"]
        if budget < 1024:
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
    for i, stop in enumerate(stops or []):
        if not stop.strip():
            raise RequestError(f"stop_sequences.{i}: each stop sequence must contain non-whitespace")
