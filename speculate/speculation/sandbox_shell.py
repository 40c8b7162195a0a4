"""The Bash shell of a speculative fork (and where its hooks run): every command in the sandbox
(:mod:`overlayfs.sandbox`), never on the real tree. Where the sandbox cannot be built (no mount backend, no bubblewrap, no user namespaces,
no seccomp) there is no speculative Bash at all: :func:`bash_sandbox` says why, and the fork's gate
stops at every Bash call.

A command that crosses a bound stops the fork at a ``resource`` boundary, never as a failed command the
model would go on from: the upper layer's bound (the sandbox kills it), and the file size bound
(RLIMIT_FSIZE, the same number): a process writing past it gets SIGXFSZ (bash reports exit 153) or, if it
ignores the signal as Python does, EFBIG ("File too large") from the write (:func:`file_size_hit`).

A directory rename answers EXDEV on every mounted backend (kernel overlayfs without ``redirect_dir``, and
the FUSE view and fuse-overlayfs the same way): ``mv`` and ``shutil.move`` copy instead, as they do across
file systems, but a bare ``rename(2)`` fails where the live path's would have worked. Such a failure stops
the fork at a ``bash`` boundary (its overlay discarded), so the model never goes on from an error the live
path would not have met (:func:`rename_refused`); accepting runs the prompt normally. So does any other
failure the live command would not have met (:mod:`speculate.speculation.unmet`): a write outside the
project and the speculation's scratch ``/tmp`` (refused as read-only), a host file the sandbox hides, and,
as root, a refusal its capabilities would have let through live.

A Bash call starts in the fork's current directory (it starts as the parent session's) and reports where it
ended, as LocalShell's does: the view is mounted at the project's own path, so a directory in the project is
the same path in it. One outside the project (an additional working directory the live session may stay in)
is not in the sandbox: a command that would start there stops the fork at a ``bash`` boundary.
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio

from speculate import ShellResult, StrPath
from speculate.agent_types import BoundaryReached
from speculate.fs import ended_in, tracked_script
from speculate.speculation.guard import Protection, check_overlay
from speculate.speculation.unmet import unmet_failure


@dataclass(frozen=True)
class BashSandbox:
    """Whether speculative Bash can run here, on which backend, and the one line that says so."""

    backend: str | None  # None: speculative Bash is off
    line: str

    @property
    def available(self) -> bool:
        return self.backend is not None


@functools.cache
def bash_sandbox(want: str = "auto") -> BashSandbox:
    """Probe once per backend choice ("auto", "kernel", "fuse", "fuse-overlayfs" or "pure")."""
    off = "off ({}): a speculation stops before any Bash command"
    try:
        from overlayfs.backends import AUTO_ORDER, get, unavailable_reason
        from overlayfs.sandbox import landlock_abi, sandbox_problem
    except ImportError as e:  # overlayfs always imports; this guards a broken install only
        return BashSandbox(None, off.format(f"overlayfs is not importable: {e}"))
    if want != "auto" and not get(want).mountable:
        return BashSandbox(None, off.format(f"the {want} overlay was chosen, which cannot be mounted"))
    candidates = AUTO_ORDER if want == "auto" else (want,)
    choices = [b for b in candidates if unavailable_reason(b) is None]
    if not choices:
        why = "; ".join(f"{b}: {unavailable_reason(b)}" for b in candidates)
        return BashSandbox(None, off.format(f"no mount backend: {why}"))
    problem = sandbox_problem()
    if problem is not None:
        return BashSandbox(None, off.format(problem))
    abi = landlock_abi()
    layers = "bubblewrap, user namespace, seccomp" + (f", Landlock ABI {abi}" if abi else ", no Landlock")
    return BashSandbox(choices[0], f"sandboxed ({choices[0]} overlay; {layers})")


class SandboxShell:
    """Runs each command (a Bash call, or a hook) in the sandbox; cancellation kills it at once.

    After each command the overlay is checked (:func:`speculate.speculation.guard.check_overlay`): a write
    to a path ``protection`` names (instructions, execution-config files), a device node, FIFO or socket,
    or a symlink out of the project stops the fork, and its overlay is discarded, since it holds them.
    A command sees the sandbox's allow-listed environment (:func:`overlayfs.sandbox.sandbox_env`), the
    variables named in ``passed_env`` (settings ``speculation.env``), and ``env``, which the session sets
    explicitly for every command (as LocalShell's).
    """

    def __init__(
        self,
        overlay: Any,
        backend: str,
        *,
        limits: Any = None,
        protection: Protection | None = None,
        env: dict[str, str] | None = None,
        passed_env: Sequence[str] = (),
    ) -> None:
        # `git status` must not refresh the index as a side effect: a write under .git/ would end the
        # speculation.
        self.env = {"GIT_OPTIONAL_LOCKS": "0", **(env or {})}
        self.passed_env = tuple(passed_env)
        self.overlay = overlay
        self.backend = backend
        self.limits = limits
        self.protection = protection
        if hasattr(overlay, "close_sandbox"):  # its commands share one mount, closed with the overlay
            from overlayfs.mount import MountError
            from overlayfs.sandbox import SandboxLimits, keep_view

            try:  # the scratch /tmp is made with the view, off the first command's path
                keep_view(overlay, backend, scratch_bound=(limits or SandboxLimits()).scratch_bound())
            except MountError:
                pass  # nothing to keep: each command meets the same error and stops the fork with it

    async def run(
        self,
        command: str,
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        cwd: StrPath | None = None,
    ) -> ShellResult:
        from overlayfs.errors import HostPathTooLong
        from overlayfs.mount import MountError
        from overlayfs.sandbox import CancelToken, SandboxLimits, run_in_overlay, sandbox_env

        argv, tag = [command], ""
        if cwd is not None:
            cwd = self._inside(cwd, command)
            # The sandbox passes the command no descriptor but its three: where it ended comes back on a copy
            # of stderr, under a tag the command cannot guess, and is taken out of what the model sees.
            tag = f"speculate-cwd-{secrets.token_hex(8)}:"
            argv = [f"exec 9>&2; {tracked_script(command, 9, tag)}"]
        token = CancelToken()

        async def kill_on_cancel() -> None:
            try:
                await trio.sleep_forever()
            finally:
                token.cancel()  # kills the sandbox now; after a normal return it is a no-op

        shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
        # The worker thread is not abandoned on cancellation: the watcher kills the sandbox, and only when
        # the thread has returned does this return, so an aborted speculation never leaves a command
        # writing into an overlay that is being discarded.
        extra = {**self.env, **(env or {})}
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_on_cancel)
                out = await trio.to_thread.run_sync(
                    lambda: run_in_overlay(
                        self.overlay,
                        [shell, "-c", *argv],
                        timeout=timeout,
                        cwd=cwd,
                        backend=self.backend,
                        cancel=token,
                        limits=self.limits,
                        stdin=stdin,
                        env={**sandbox_env(passed=self.passed_env), **extra},
                    )
                )
                nursery.cancel_scope.cancel()
        except MountError as e:  # the view could not be mounted (or the sandbox built) for this command
            raise BoundaryReached("error", f"{command!r}: the sandbox could not start: {e}") from e
        stderr, ended = ended_in(out.stderr, tag) if tag else (out.stderr, None)
        if out.limit is not None:
            raise BoundaryReached("resource", f"{command!r}: {stderr.strip().splitlines()[-1]}")
        fsize = self.limits.upper_bytes if self.limits is not None else SandboxLimits().upper_bytes
        if file_size_hit(out.exit_code, out.stdout + stderr):
            big = _largest_file(self.overlay.upper, fsize)
            raise BoundaryReached(
                "resource",
                f"{command!r}: a file reached the file size bound of {fsize} bytes "
                "(RLIMIT_FSIZE)" + (f": {big}" if big else ""),
                discard=True,
            )
        if rename_refused(out.exit_code, out.stdout + stderr):
            raise BoundaryReached(
                "bash",
                f"{command!r}: a directory rename the speculation's overlay answers with "
                "EXDEV (mv copies instead; rename(2) fails): the live path runs it",
                discard=True,
            )
        if out.backend_failed is not None:
            raise BoundaryReached("error", f"{command!r}: the overlay backend failed: {out.backend_failed}")
        if self.protection is not None:
            try:
                changes = self.overlay.changes()
            except HostPathTooLong as e:  # a tree deeper than the host can name: none of it can land
                raise BoundaryReached("resource", f"{command!r}: {e.strerror}", discard=True) from e
            check_overlay(
                self.overlay,
                changes,
                protection=self.protection,
                command=command,
                read_only=self._read_only,
            )
        # A Bash call's command (the tool always says where it runs); a hook, run without, fails closed on
        # its exit status instead (the hook runner's rules), and its failures are its own.
        unmet = (
            unmet_failure(stderr, out.exit_code, project=os.path.abspath(self.overlay.lower), cwd=cwd)
            if cwd is not None and not out.timed_out
            else None
        )
        if unmet is not None:
            raise BoundaryReached(
                "bash",
                f"{command!r}: {unmet.words()}: the live path runs it",
                discard=True,
            )
        ended = ended if out.exit_code == 0 and not out.timed_out else None
        return ShellResult(out.stdout, stderr, out.exit_code, out.timed_out, cwd=ended)

    def _inside(self, cwd: StrPath, command: str) -> str:
        """``cwd`` spelled under the project's path, where the sandbox mounts the view; outside: a boundary."""
        lower = os.path.abspath(self.overlay.lower)
        for spelled in (os.path.abspath(cwd), os.path.realpath(cwd)):
            for root in {lower, os.path.realpath(lower)}:
                if spelled == root or spelled.startswith(root.rstrip("/") + "/"):
                    return os.path.join(lower, os.path.relpath(spelled, root))
        raise BoundaryReached(
            "bash",
            f"{command!r}: it would run in {os.fspath(cwd)}, outside the project, which is all a "
            "speculation's sandbox holds",
        )

    def _read_only(self, command: str) -> bool:
        from speculate.shell import classify

        return classify(command, project_root=str(self.overlay.lower)).read_only


SIGXFSZ_EXIT = 128 + 25  # bash's status for a child killed by SIGXFSZ


def file_size_hit(exit_code: int, output: str) -> bool:
    """Did the command meet RLIMIT_FSIZE: killed by SIGXFSZ, or a write refused with EFBIG?"""
    return exit_code == SIGXFSZ_EXIT or "File too large" in output or "File size limit exceeded" in output


def rename_refused(exit_code: int, output: str) -> bool:
    """Did the command fail on a rename the overlay refused with EXDEV (and the live path would not)?"""
    return exit_code != 0 and "Invalid cross-device link" in output


def _largest_file(upper: Any, bound: int) -> str | None:
    """A file in the upper layer at (or over) ``bound`` bytes, relative to it."""
    root = os.fspath(upper)
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                if os.lstat(path).st_size >= bound:
                    return os.path.relpath(path, root)
            except OSError:
                continue
    return None


class NoShell:
    """The fork's shell where no sandbox can be built; the gate stops before it, this is the backstop."""

    def __init__(self, why: str) -> None:
        self.why = why

    async def run(
        self,
        command: str,
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        cwd: StrPath | None = None,
    ) -> ShellResult:
        raise BoundaryReached("bash", f"{command!r}: speculative Bash is {self.why}")
