"""What a scripted step may call: the agent's own tools with their Input models (the schema of a scripted
call), the intents (the same calls named by what they do), and the tools a real model may call that the
agent does not offer (other tools, MCP server tools)."""

from __future__ import annotations

from pydantic import BaseModel

from speculate.tools import default_tools
from speculate.tools.registry import CLAUDE_CODE_ONLY

# Intent steps: the same calls named by what they do (docs/scenarios.md): key -> (tool, renamed fields).
# The tool's other Input fields keep their names, so a field added to a tool is an intent field too.
INTENTS: dict[str, tuple[str, dict[str, str]]] = {
    "read": ("Read", {"path": "file_path"}),
    "write": ("Write", {"path": "file_path"}),
    "edit": ("Edit", {"path": "file_path", "old": "old_string", "new": "new_string", "all": "replace_all"}),
    "list": ("Glob", {}),
    "search": ("Grep", {"mode": "output_mode", "ignore_case": "case_insensitive", "limit": "head_limit"}),
    "run": ("Bash", {"timeout_s": "timeout_ms"}),  # seconds, converted (Parser.intent)
}
# Tools the real model may call although the agent does not offer them (a speculation stops at them with a
# denied_tool boundary; the agent answers "No such tool"). Inputs: a mapping of scalars, not checked.
OTHER_TOOLS = CLAUDE_CODE_ONLY  # speculate.tools.registry: Claude Code has them, speculate does not
MCP_PREFIX = "mcp__"  # MCP server tools (mcp__<server>__<tool>): inputs as for OTHER_TOOLS


def tool_inputs() -> dict[str, type[BaseModel]]:
    """Tool name -> its pydantic Input model: the agent's own tools are the schema of a scripted call."""
    return {tool.name: tool.Input for tool in default_tools()}


def intent_fields(key: str) -> dict[str, str]:
    """An intent's keys -> its tool's Input fields, in the model's field order."""
    name, renames = INTENTS[key]
    back = {field: alias for alias, field in renames.items()}
    return {back.get(field, field): field for field in tool_inputs()[name].model_fields}
