"""The Bash shell of a speculative fork when a mounted overlay is available: the command runs in the
sandbox (merged view at the project path, network cut, /tmp private, timeout), never on the real tree."""

from __future__ import annotations

from typing import Any

import trio

from speculate import ShellResult


class SandboxShell:
    def __init__(self, overlay: Any, backend: str) -> None:
        self.overlay = overlay
        self.backend = backend

    async def run(self, command: str, *, timeout: float) -> ShellResult:
        from overlayfs.sandbox import run_sandboxed

        out = await trio.to_thread.run_sync(
            lambda: run_sandboxed(self.overlay, command, timeout=timeout, backend=self.backend),
            abandon_on_cancel=True,
        )
        if isinstance(out, ShellResult):
            return out
        stdout, stderr, code, timed_out = (out.stdout, out.stderr, out.exit_code, out.timed_out) \
            if hasattr(out, "stdout") else out
        return ShellResult(stdout, stderr, code, timed_out)
