"""What running hooks produces: one :class:`HookRan` per command (for the REPL and a fork's record), one
outcome per event for the agent loop, and the words that reach the model, in Claude Code 2.1.332's forms.

Claude Code sends hook context to the model as ``role: "system"`` messages after the prompt or the tool
results (``PostToolUse:Read hook additional context: ...``); speculate sends the same lines, on the
Messages API every backend speaks, as one ``<system-reminder>`` text block after the prompt or the tool
results (:func:`reminder`). Clients and the simulator read such blocks as context, not as the user's words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from speculate.errors import SpeculateError
from speculate.hooks.output import Parsed
from speculate.tools.budget import HOOK_OUTPUT_BUDGET, cut

Decision = Literal["allow", "deny", "ask"]


class PromptBlocked(SpeculateError):
    """A UserPromptSubmit hook refused the prompt (exit 2, or ``decision: "block"``); the message is for the
    user, and the prompt is not sent."""


class CompactBlocked(SpeculateError):
    """A PreCompact hook refused the compaction (exit 2); the message (its stderr) is for the user."""


@dataclass(frozen=True)
class HookRan:
    """One hook command ran (an event for the REPL, and for a fork's record)."""

    event: str
    command: str
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    tool: str | None = None
    sandboxed: bool = False
    parsed: Parsed = field(
        default_factory=Parsed
    )  # its JSON output, or plain text, and what did not validate

    @property
    def exited_2(self) -> bool:
        return self.exit_code == 2 and not self.timed_out

    @property
    def failed(self) -> bool:
        return self.timed_out or self.exit_code not in (0, 2)

    @property
    def blocked(self) -> bool:
        """It refused: exit 2, ``decision: "block"``, or a PreToolUse ``deny``."""
        return self.exited_2 or self.parsed.get("decision") == "block" or self.decision == "deny"

    @property
    def decision(self) -> Decision | None:
        """A PreToolUse hook's permission decision (the older ``decision: approve|block`` included)."""
        if self.exited_2:
            return "deny"
        d = self.parsed.specific("permissionDecision")
        if d is None and self.parsed.get("decision") in ("approve", "block") and self.event == "PreToolUse":
            d = "allow" if self.parsed.get("decision") == "approve" else "deny"
        return d

    @property
    def reason(self) -> str:
        """Why it refused or asked, in the hook's words: stderr for exit 2, else the JSON reason."""
        if self.exited_2:
            return self.stderr.strip() or f"(the hook `{self.command}` gave no reason)"
        return (self.parsed.specific("permissionDecisionReason") or self.parsed.get("reason") or "").strip()

    @property
    def stop_reason(self) -> str | None:
        """``continue: false``: the turn stops; its ``stopReason`` (maybe empty). None: it goes on."""
        return (self.parsed.get("stopReason") or "") if self.parsed.stops else None

    @property
    def shown(self) -> str:
        """What the user sees of it: its ``systemMessage``, or its plain stdout unless suppressed."""
        if self.parsed.get("systemMessage"):
            return str(self.parsed.get("systemMessage"))
        if self.parsed.out is None and not self.parsed.get("suppressOutput"):
            return self.parsed.text
        return ""

    @property
    def context(self) -> str | None:
        text = self.parsed.specific("additionalContext")
        return cut(text, HOOK_OUTPUT_BUDGET, what="hook context") if text is not None else None


def reminder(lines: list[str]) -> str:
    """Context lines for the model, in one text block."""
    return "<system-reminder>\n" + "\n\n".join(lines) + "\n</system-reminder>"


def error_prefix(r: HookRan) -> str:
    """How Claude Code quotes an exit-2 hook's stderr: ``[command]: stderr``."""
    return f"[{r.command}]: {r.stderr.strip()}"


@dataclass
class PromptOutcome:
    context: list[str] = field(default_factory=list)  # lines for the model, after the prompt
    stop: str | None = None  # continue: false: the prompt is kept, no request is made (its stopReason)


@dataclass
class PreToolOutcome:
    decision: Decision | None = None  # deny > ask > allow across the hooks; None: no opinion
    reason: str = ""  # for the question (ask) or the refusal (deny)
    refusal: str | None = None  # the is_error result for the model, when denied
    updated_input: dict[str, Any] | None = None  # the input the call runs with instead
    context: list[str] = field(default_factory=list)
    stop: str | None = None  # continue: false: the call runs, then the turn ends


@dataclass
class PostOutcome:
    context: list[str] = field(
        default_factory=list
    )  # block reasons and additional context, after the results
    stop: str | None = None


@dataclass
class StopOutcome:
    feedback: str | None = None  # the turn goes on with this (exit 2, decision block)
    stop: str | None = None  # continue: false: the turn ends even so


STOP_PREAMBLE = (
    "The user's Stop hook kept the turn going; what follows is the hook's output, not the user's words."
)
NO_RESPONSE = (
    "No response requested."  # the answer Claude Code records for a turn a hook stopped before a request
)


def stop_feedback(feedback: str) -> str:
    return f"<system-reminder>\n{STOP_PREAMBLE}\nStop hook feedback:\n{feedback}\n</system-reminder>"


def prompt_stopped(reason: str) -> str:
    return (
        "<system-reminder>\nThe text below is the output of a hook, not a message from the user.\n"
        f"Operation stopped by hook: {reason}\n</system-reminder>"
    )
