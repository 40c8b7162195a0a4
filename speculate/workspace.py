"""What a session knows about its project besides the code: the user's settings (hooks, permission
rules), the project instructions, the MCP servers, and the system prompt built from them.

:func:`open_workspace` loads the settings and instructions and connects the MCP servers of ``.mcp.json``;
the servers live in its async exit stack, so no server outlives the session that opened it.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculate.hooks import HookRan, HookRunner, HookShell, HookTranscript
from speculate.instructions import Instructions, load_instructions
from speculate.prompts import system_parts
from speculate.settings import Settings, claude_md_excludes, load_settings
from speculate.tools.base import Tool


@dataclass
class Workspace:
    project: Path
    settings: Settings = field(default_factory=Settings)
    instructions: Instructions = field(default_factory=Instructions)
    mcp: Any = None  # speculate.mcp.McpServers, when .mcp.json names servers
    notes: list[str] = field(default_factory=list)  # said once to the user: ignored settings, failed servers
    user: Path | None = None  # Claude Code's per-user directory; None: $CLAUDE_CONFIG_DIR or ~/.claude

    @classmethod
    def load(cls, project: Path, *, user: Path | None = None, trusted: bool = True) -> Workspace:
        """Settings and instructions (no MCP servers: those need :func:`open_workspace`). ``trusted``: the
        workspace's trust (:mod:`speculate.trust`); untrusted, the project's allow rules are left out."""
        settings = load_settings(project, user=user, trusted=trusted)
        instructions = load_instructions(project, user=user, excludes=claude_md_excludes(project, user=user))
        return cls(project, settings, instructions, notes=[*settings.notes, *instructions.notes], user=user)

    @property
    def tools(self) -> list[Tool]:
        """The MCP servers' tools (after the built-in ones, in a stable order: part of the cache key)."""
        return list(self.mcp.tools) if self.mcp is not None else []

    def system(self, *, today: datetime.date | None = None) -> tuple[str, str]:
        mcp = self.mcp.instructions() if self.mcp is not None else ""
        return system_parts(self.project, instructions=self.instructions.render(), mcp=mcp, today=today)

    def reload_instructions(self) -> bool:
        """Read the instructions files again; True if what the system prompt holds changed."""
        excludes = claude_md_excludes(self.project, user=self.user)
        new = load_instructions(self.project, user=self.user, excludes=excludes)
        changed = new.render() != self.instructions.render()
        self.instructions = new
        return changed

    def hooks(
        self,
        *,
        shell: HookShell,
        session_id: str,
        mode: Callable[[], str],
        transcript: HookTranscript | None = None,
        sandboxed: bool = False,
        boundary: str | None = None,
        on_event: Callable[[HookRan], None] | None = None,
    ) -> HookRunner:
        return HookRunner(
            self.settings.hooks,
            shell=shell,
            project=self.project,
            session_id=session_id,
            mode=mode,
            transcript=transcript,
            sandboxed=sandboxed,
            boundary=boundary,
            on_event=on_event,
        )


@asynccontextmanager
async def open_workspace(
    project: Path, *, mcp: bool = True, user: Path | None = None, trusted: bool = True
) -> AsyncIterator[Workspace]:
    """The project's workspace, with its MCP servers connected (and closed on exit), but those the
    settings disable."""
    ws = Workspace.load(project, user=user, trusted=trusted)
    async with AsyncExitStack() as stack:
        if mcp:
            from speculate.mcp import connect_servers, load_mcp_config
            from speculate.mcp.config import disabled_servers

            config = load_mcp_config(project, disabled=disabled_servers(project, ws.settings.mcp_disabled))
            if config.servers:
                ws.mcp = await connect_servers(config, stack, read_only=ws.settings.read_only_mcp)
                ws.notes += ws.mcp.notes
        yield ws
