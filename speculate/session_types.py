"""What a session is made with: :class:`SessionConfig`, the permission modes and the ``ask`` callback.

Below both :mod:`speculate.session` (which assembles a session from them) and the speculation engine (which
reads the configuration), so neither imports the other for them; it imports nothing of either. What a turn
gives back (:class:`speculate.session_turn.TurnOutcome`) lives with the session, which makes it: the engine
hands back a decision (:class:`speculate.speculation.accept.Acceptance`), never a turn.
:mod:`speculate.session` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from speculate.compaction import COMPACT_MARGIN, DEFAULT_WINDOW
from speculate.models.base import Model
from speculate.settings_modes import PermissionMode  # defined with the settings that name the modes

AskFn = Callable[[str, str], Awaitable[Literal["y", "n", "always"]]]
SpecEdits = Literal["stop", "ask"]


@dataclass(kw_only=True)
class SessionConfig:
    project: Path
    model: Model
    model_name: str = "claude-sonnet-4-6"
    mode: PermissionMode = "acceptEdits"
    speculate: bool = True
    fork: bool = True  # False: show suggestions (ghost text, Tab) but never fork; the bench's `suggest` arm
    overlay_backend: str = "auto"  # auto | pure | fuse | kernel
    accept_running: Literal["wait", "stop"] = "wait"  # accepting a running fork: let it finish, or stop it
    max_turns: int = 50
    spec_max_turns: int = 20
    spec_max_messages: int = 100
    # Rules and directories from the command line (--allowedTools, --disallowedTools, --add-dir), joined to
    # the settings' own.
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    additional_dirs: list[str] = field(default_factory=list)
    # True: the settings' permissions.defaultMode (speculate.settings_modes), where one counts, replaces
    # ``mode``, which is then the fallback: what a command line without --permission-mode means.
    settings_mode: bool = False
    # Workspace trust (speculate.trust): None reads it from Claude Code's global config; True or False
    # states it (the bench trusts the workspaces it generates). Untrusted, the project's allow rules and
    # additional directories are left out, as Claude Code leaves them.
    trusted: bool | None = None
    events_path: Path | None = None
    # Records kept in memory (the file keeps them all; statistics count them all): None keeps every one (the
    # bench reads them back); a long REPL session keeps the last ones, so its memory stays flat.
    keep_records: int | None = None
    transcript_path: Path | None = None
    # Where the Claude Code-shaped transcript a hook reads (transcript_path) is written, for a session with
    # hooks; None: the default (speculate.hooks.transcript.default_dir()).
    hook_transcript_dir: Path | None = None
    spill_dir: Path | None = None
    max_tokens: int = 8192
    sandbox_limits: Any = None  # overlayfs.sandbox.SandboxLimits for speculative Bash; None: the defaults
    mcp: bool = True  # connect the MCP servers of the project's .mcp.json
    user_dir: Path | None = None  # Claude Code's per-user directory; None: $CLAUDE_CONFIG_DIR or ~/.claude
    context_window: int = DEFAULT_WINDOW  # the model's, in tokens (speculate.compaction)
    compact_margin: int = COMPACT_MARGIN  # auto-compaction at context_window - compact_margin
    auto_compact: bool = True
    # A request refused as over the window compacts (its copy cut down to be summarisable) and is retried
    # once; needs auto_compact too.
    reactive_compact: bool = True
    # Environment overrides for every command the session runs (Bash, hooks; main loop and sandboxed
    # fork alike): the bench pins PATH to the workspace's toolchain (bench/toolchain.py).
    tool_env: dict[str, str] | None = None
    fork_headroom: int = 20_000  # tokens a speculative turn may add: no speculation closer to the threshold
    # The speculation policy (speculate.speculation.policy); None: the settings' speculation.value /
    # .candidates (absent: always fork, one candidate). spec_history: counts to start from, as a persisted
    # project history would be (SpecPolicy.state()).
    spec_value: float | None = None  # λ, dollars per second saved; inf: always fork
    spec_candidates: int | None = None  # top-K
    spec_history: dict[str, Any] | None = None
    keep_accepted_diff: bool = False  # keep the diff of the last accepted speculation (the REPL's /diff)
    # A fork's Write/Edit that the live path would ask about (default mode): "stop", the fork stops before
    # it (an `edit` boundary); "ask", it is written into the overlay and asked about on acceptance with its
    # diff, as a sandboxed command the live path would ask about is (docs/speculation.md, "Edits in default
    # mode"). None: the settings' speculation.edits, else spec_edits_default ("stop" for the API and the
    # bench; the REPL's is "ask": a person is there to read the diffs).
    spec_edits: SpecEdits | None = None
    spec_edits_default: SpecEdits = "stop"
