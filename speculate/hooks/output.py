"""A hook's JSON output, as Claude Code defines it, validated per event.

A hook that prints a JSON object on stdout (and does not exit 2) gives structured instructions: the common
fields ``continue`` / ``stopReason`` / ``suppressOutput`` / ``systemMessage``, ``decision`` / ``reason``
where the event takes them, and ``hookSpecificOutput`` (``hookEventName`` plus the event's own fields:
PreToolUse ``permissionDecision`` / ``permissionDecisionReason`` / ``updatedInput`` / ``additionalContext``,
``additionalContext`` for UserPromptSubmit, PostToolUse, PostToolUseFailure and SessionStart).

Claude Code 2.1.332 reads the JSON on any exit status but 2 (its docs say exit 0 only; it also applied a
``deny`` printed by a hook that exited 1 or 3), and treats stdout that is not a JSON object as plain text.
What does not validate is a list of ``problems``: the main loop shows them and ignores the bad parts (an
unknown ``permissionDecision`` becomes ``ask``, see :mod:`speculate.hooks.runner`); a speculative fork stops
at them (fail closed).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from speculate.tools.budget import HOOK_OUTPUT_BUDGET, cut


class Common(BaseModel):
    """Fields every event's output may carry."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    continue_: bool = Field(default=True, alias="continue")  # False: the turn stops after this hook
    stopReason: str | None = None  # shown to the user (and the model, as Claude Code does) when it stops
    suppressOutput: bool = False  # keep the hook's stdout off the user's screen
    systemMessage: str | None = None  # a line for the user


class PreToolSpecific(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hookEventName: Literal["PreToolUse"]
    permissionDecision: Literal["allow", "deny", "ask"] | None = None
    permissionDecisionReason: str | None = None
    updatedInput: dict[str, Any] | None = None
    additionalContext: str | None = None


def _context_specific(event: str) -> type[BaseModel]:
    # Fields made at run time (a Literal of the event's name) go in as (annotation, default) pairs.
    fields: dict[str, Any] = {"hookEventName": (Literal[event], ...), "additionalContext": (str | None, None)}
    return create_model(f"{event}Specific", __config__=ConfigDict(extra="forbid"), **fields)


class PreToolOutput(Common):
    decision: Literal["approve", "block"] | None = None  # the older form of permissionDecision
    reason: str | None = None
    hookSpecificOutput: PreToolSpecific | None = None


def _block_output(event: str, *, context: bool) -> type[Common]:
    fields: dict[str, Any] = {"decision": (Literal["block"] | None, None), "reason": (str | None, None)}
    if context:
        fields["hookSpecificOutput"] = (_context_specific(event) | None, None)
    return create_model(f"{event}Output", __base__=Common, **fields)


def _context_output(event: str) -> type[Common]:
    fields: dict[str, Any] = {"hookSpecificOutput": (_context_specific(event) | None, None)}
    return create_model(f"{event}Output", __base__=Common, **fields)


OUTPUTS: dict[str, type[Common]] = {
    "PreToolUse": PreToolOutput,
    "PostToolUse": _block_output("PostToolUse", context=True),
    "UserPromptSubmit": _block_output("UserPromptSubmit", context=True),
    "Stop": _block_output("Stop", context=False),
    "PostToolUseFailure": _context_output("PostToolUseFailure"),
    "SessionStart": _context_output("SessionStart"),
    "PreCompact": Common,
    "SessionEnd": Common,
}


@dataclass(frozen=True)
class Parsed:
    """What a hook printed: validated JSON (``out``), or plain text, and what did not validate."""

    out: Common | None = None
    text: str = ""  # stdout, when it is not a JSON object
    problems: tuple[str, ...] = ()
    raw: dict[str, Any] | None = None  # the JSON object as printed (a PreToolUse permissionDecision it names)

    def get(self, name: str) -> Any:
        """A top-level field, or None (``decision``, ``reason``)."""
        return getattr(self.out, name, None) if self.out is not None else None

    def specific(self, name: str) -> Any:
        """A ``hookSpecificOutput`` field, or None."""
        spec = self.get("hookSpecificOutput")
        return getattr(spec, name, None) if spec is not None else None

    @property
    def stops(self) -> bool:
        return self.out is not None and not self.out.continue_


def parse_output(event: str, stdout: str) -> Parsed:
    """Read ``stdout`` as Claude Code reads it for ``event``: a JSON object, or plain text."""
    text = stdout.strip()
    if not text.startswith("{"):  # plain text reaches the conversation as it is: cut to its budget
        return Parsed(text=cut(text, HOOK_OUTPUT_BUDGET, what="hook output"))
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        return Parsed(
            text=cut(text, HOOK_OUTPUT_BUDGET, what="hook output"),
            problems=(f"stdout starts like JSON but is not: {e.msg} (column {e.colno})",),
        )
    if not isinstance(raw, dict):  # pragma: no cover - a text starting with "{" that parses is an object
        return Parsed(text=text)
    model = OUTPUTS[event]
    data = copy.deepcopy(raw)
    problems: list[str] = []
    for _ in range(8):  # each pass drops what failed; a few passes settle any object
        try:
            return Parsed(out=model.model_validate(data), problems=tuple(problems), raw=raw)
        except ValidationError as err:
            for error in err.errors():
                where = ".".join(str(p) for p in error["loc"])
                problems.append(f"{where}: {_words(error, event)}")
                _drop(data, error["loc"])
    return Parsed(problems=tuple(problems), raw=raw)  # pragma: no cover


def _words(e: Any, event: str) -> str:
    if e["type"] == "extra_forbidden":
        return f"not a field of {event}'s output (ignored)"
    if e["loc"][-1] == "hookEventName":
        return f"{e['input']!r} is not {event!r}: the hookSpecificOutput is for another event (ignored)"
    return f"{e['msg']} (got {e['input']!r}; ignored)"


def _drop(data: dict[str, Any], loc: tuple[Any, ...]) -> None:
    """Remove the field at ``loc`` (a mismatched hookEventName drops its whole hookSpecificOutput)."""
    if len(loc) >= 2 and loc[0] == "hookSpecificOutput" and loc[1] == "hookEventName":
        data.pop("hookSpecificOutput", None)
        return
    node: Any = data
    for part in loc[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            data.pop(loc[0], None)
            return
    if isinstance(node, dict):
        if loc[-1] in node:
            node.pop(loc[-1])
        else:  # a union's branch name in the location: drop the field it belongs to
            data.pop(loc[0], None)
    else:
        data.pop(loc[0], None)
