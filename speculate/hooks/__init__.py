"""Hooks: the user's shell commands around a session and its turns, with Claude Code's protocol.

Events (set in ``.claude/settings.json``, see :mod:`speculate.settings`): SessionStart, UserPromptSubmit,
PreToolUse, PostToolUse, PostToolUseFailure, Stop, PreCompact and SessionEnd. A hook gets its event as JSON on
stdin (:mod:`.payloads`), may answer with an exit status (2 refuses) and JSON on stdout (:mod:`.output`),
and reads the conversation through ``transcript_path`` (:mod:`.transcript`). :mod:`.runner` runs the
matching hooks of an event (in parallel, each command once) on the host or, for a speculative fork, in its
sandbox, where they fail closed; :mod:`.events` holds what that produces and what reaches the model.
docs/claude-code.md ("Hooks") says, event by event, what Claude Code 2.1.332 does and where speculate differs.
"""

from speculate.hooks.events import (
    CompactBlocked,
    HookRan,
    PostOutcome,
    PreToolOutcome,
    PromptBlocked,
    PromptOutcome,
    StopOutcome,
)
from speculate.hooks.runner import HookRunner, HookShell, elapsed_ms
from speculate.hooks.transcript import HookTranscript

__all__ = [
    "CompactBlocked",
    "HookRan",
    "HookRunner",
    "HookShell",
    "HookTranscript",
    "PostOutcome",
    "PreToolOutcome",
    "PromptBlocked",
    "PromptOutcome",
    "StopOutcome",
    "elapsed_ms",
]
