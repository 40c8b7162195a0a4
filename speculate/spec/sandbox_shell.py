"""The Bash shell of a speculative fork when a mounted overlay is available: the command runs in the
sandbox (merged view at the project path, network cut, /tmp private, timeout), never on the real tree."""

from __future__ import annotations

import threading
from typing import Any

import trio

from speculate import ShellResult


class SandboxShell:
    def __init__(self, overlay: Any, backend: str) -> None:
        self.overlay = overlay
        self.backend = backend

    async def run(self, command: str, *, timeout: float) -> ShellResult:
        from overlayfs.sandbox import run_sandboxed

        cancel = threading.Event()

        async def kill_on_cancel() -> None:
            try:
                await trio.sleep_forever()
            finally:
                cancel.set()

        # The worker thread is not abandoned on cancellation: the watcher sets ``cancel``, the sandbox is
        # killed within ~50 ms, and only then does this return, so an aborted speculation never leaves a
        # command writing into an overlay that is being discarded.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(kill_on_cancel)
            out = await trio.to_thread.run_sync(
                lambda: run_sandboxed(self.overlay, command, timeout=timeout, backend=self.backend,
                                      cancel=cancel))
            nursery.cancel_scope.cancel()
        return ShellResult(out.stdout, out.stderr, out.exit_code, out.timed_out)
