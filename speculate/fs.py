"""The real project tree as the tools see it: :class:`LocalFS` (a FileSystem) and :class:`LocalShell`.

Both are rooted at the project directory. LocalFS refuses paths that leave the root lexically (``..``,
absolute paths elsewhere) or through a symlink (checked with ``realpath``), and writes atomically
(temp file + rename, keeping the old file's mode). LocalShell runs ``bash -c`` in the root (a Bash tool
call: in its current directory) in its own process group and kills the whole group when the command ends,
times out or is cancelled.
"""

from __future__ import annotations

import os
import signal
import stat as stat_mod
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import trio

from overlayfs.paths import PathEscapeError, to_relative
from speculate import ShellResult, StrPath

# Bytes kept per stream; the rest is drained and counted so a chatty command cannot fill memory.
SHELL_CAPTURE_LIMIT = 8 << 20


def _umask() -> int:
    """The process umask, read without the set-and-restore race where /proc allows it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


class LocalFS:
    """The real project tree, rooted at ``root``; see :class:`speculate.FileSystem` for the contract."""

    def __init__(self, root: StrPath) -> None:
        p = Path(os.path.abspath(os.fsdecode(root)))
        if not p.is_dir():
            raise NotADirectoryError(2, "project root is not a directory", str(p))
        self._root = p
        self._real = Path(os.path.realpath(p))

    def __repr__(self) -> str:
        return f"LocalFS({str(self._root)!r})"

    @property
    def root(self) -> Path:
        return self._root

    # -- resolution ---------------------------------------------------------------------------------------

    def relative(self, path: StrPath) -> str:
        """``path`` as a project-relative POSIX path ("." for the root); lexical, links not followed."""
        try:
            return to_relative(self._root, path)
        except PathEscapeError:
            # An absolute path spelled through the root's real location is still inside.
            if self._real == self._root:
                raise
            return to_relative(self._real, path)

    def _resolve(self, path: StrPath, *, follow_last: bool = True) -> Path:
        """The real absolute path to operate on; raises PathEscapeError if a symlink leads out of the root.

        ``follow_last=False`` resolves only the parent (for unlink/rename, which act on a link itself).
        """
        rel = self.relative(path)
        full = self._real / rel if rel != "." else self._real
        if follow_last or rel == ".":
            resolved = Path(os.path.realpath(full))
        else:
            resolved = Path(os.path.realpath(full.parent)) / full.name
        if resolved != self._real and self._real not in resolved.parents:
            raise PathEscapeError(path, self._root, "goes through a symlink that leaves the project root")
        return resolved

    # -- FileSystem ---------------------------------------------------------------------------------------

    def read_bytes(self, path: StrPath) -> bytes:
        return self._resolve(path).read_bytes()

    def write_bytes(self, path: StrPath, data: bytes) -> None:
        """Atomic replace: readers see the old or the new content, never a torn file (not fsynced: a
        speculation overlay or an agent edit needs atomicity, not durability across power loss)."""
        target = self._resolve(path)
        try:
            st = os.stat(target)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        else:
            if stat_mod.S_ISDIR(st.st_mode):
                raise IsADirectoryError(21, "Is a directory", str(path))
            mode = stat_mod.S_IMODE(st.st_mode)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), mode)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def exists(self, path: StrPath) -> bool:
        return self._resolve(path).exists()

    def is_file(self, path: StrPath) -> bool:
        return self._resolve(path).is_file()

    def is_dir(self, path: StrPath) -> bool:
        return self._resolve(path).is_dir()

    def stat(self, path: StrPath) -> os.stat_result:
        return os.stat(self._resolve(path))

    def listdir(self, path: StrPath) -> list[str]:
        return sorted(os.listdir(self._resolve(path)))

    def walk(self, path: StrPath = ".") -> Iterator[tuple[str, list[str], list[str]]]:
        top = self._resolve(path)
        if not top.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(path))
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            rel = os.path.relpath(dirpath, self._real)
            dirnames.sort()  # in place: the caller prunes this very list
            yield ("." if rel == "." else Path(rel).as_posix()), dirnames, sorted(filenames)

    def mkdir(self, path: StrPath, parents: bool = False) -> None:
        """Like ``mkdir``; ``parents=True`` is ``mkdir -p`` (an existing directory is fine)."""
        self._resolve(path).mkdir(parents=parents, exist_ok=parents)

    def unlink(self, path: StrPath) -> None:
        os.unlink(self._resolve(path, follow_last=False))

    def rename(self, src: StrPath, dst: StrPath) -> None:
        os.replace(self._resolve(src, follow_last=False), self._resolve(dst, follow_last=False))


def tracked_script(command: str, fd: int, tag: str = "") -> str:
    """``command`` as a Bash tool call runs, the way Claude Code runs it: ``eval`` of the command quoted
    (its syntax errors read "eval: line 1", ``$1`` and ``$#`` are empty), with fd ``fd`` closed while it
    runs; then, only if it exited 0, ``\\n<tag><pwd -P>\\0`` (the shell's physical directory) goes to
    ``fd``, the side channel the next call's directory is read from (:func:`ended_in`). Its exit status is
    the command's; one that ends in ``exit`` (or fails) records nothing, so the directory stays where it
    was, as in Claude Code. ``tag`` lets it be found where ``fd`` is a copy of stderr (the sandbox passes
    no other descriptor)."""
    quoted = "'" + command.replace("'", "'\\''") + "'"
    # A directory the command removed makes pwd fail: the line is then empty, and the status still 0.
    return (
        f"eval {quoted} {fd}>&- && {{ command printf '\\n%s%s\\0' '{tag}' "
        f'"$(command pwd -P 2>/dev/null)" >&{fd}; exit 0; }}'
    )


def ended_in(text: str, tag: str = "") -> tuple[str, str | None]:
    """``text`` without what :func:`tracked_script` wrote with ``tag`` (the last one), and the directory
    it names (None where there is none, or no directory)."""
    at = text.rfind("\n" + tag) if tag else (0 if text.startswith("\n") else -1)
    if at < 0:
        return text, None
    end = text.find("\0", at + 1 + len(tag))  # NUL: the one byte no path holds
    where = text[at + 1 + len(tag) : end if end >= 0 else len(text)]
    rest = text[:at] + (text[end + 1 :] if end >= 0 else "")
    return rest, where if where.startswith("/") else None


class LocalShell:
    """Runs ``bash -c`` in ``root`` with stdin closed; keyword-only ``env`` overrides are added on top.

    A run given ``cwd`` (a Bash tool call) starts there and reports where the shell ended
    (``ShellResult.cwd``), read from a pipe of its own (:func:`tracked_script`), never from its output."""

    def __init__(self, root: StrPath, *, env: dict[str, str] | None = None) -> None:
        self.root = Path(os.path.abspath(os.fsdecode(root)))
        # A pager would wait forever on a closed stdin.
        self.env = {**os.environ, "PAGER": "cat", "GIT_PAGER": "cat", **(env or {})}

    def __repr__(self) -> str:
        return f"LocalShell({str(self.root)!r})"

    async def run(
        self,
        command: str,
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        cwd: StrPath | None = None,
    ) -> ShellResult:
        """``stdin`` (a hook's event JSON) is written and closed; without it stdin is closed at once."""
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        side_r = side_w = -1
        if cwd is not None:
            side_r, side_w = os.pipe()
        try:
            proc = await trio.lowlevel.open_process(
                ["bash", "-c", command if cwd is None else tracked_script(command, side_w)],
                cwd=self.root if cwd is None else cwd,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, so we can kill everything it started
                pass_fds=(side_w,) if cwd is not None else (),
            )
        except BaseException:
            if cwd is not None:
                os.close(side_r)
            raise
        finally:
            if cwd is not None:
                os.close(side_w)  # the child's copy is the only writer left: EOF when the shell is gone
        assert proc.stdout is not None and proc.stderr is not None
        out, err, side = _Capture(), _Capture(), _Capture()
        side_stream = trio.lowlevel.FdStream(side_r) if cwd is not None else None
        try:
            with trio.move_on_after(timeout) as scope:
                async with trio.open_nursery() as nursery:
                    if proc.stdin is not None:
                        nursery.start_soon(_feed, proc.stdin, stdin or b"")
                    nursery.start_soon(out.drain, proc.stdout)
                    nursery.start_soon(err.drain, proc.stderr)
                    if side_stream is not None:
                        nursery.start_soon(side.drain, side_stream)
                    await proc.wait()
                    # Background children would hold the pipes open: they do not outlive the command.
                    _kill_group(proc.pid)
        finally:
            _kill_group(proc.pid)
            with trio.CancelScope(shield=True):
                await proc.wait()
                if proc.stdin is not None:
                    await proc.stdin.aclose()
                await proc.stdout.aclose()
                await proc.stderr.aclose()
                if side_stream is not None:
                    await side_stream.aclose()
        code = proc.returncode
        assert code is not None
        _, ended = ended_in(side.text()) if cwd is not None and not scope.cancelled_caught else ("", None)
        return ShellResult(
            stdout=out.text(),
            stderr=err.text(),
            exit_code=128 - code if code < 0 else code,  # killed by signal N -> 128+N, as bash reports
            timed_out=scope.cancelled_caught,
            cwd=ended if code == 0 else None,
        )


async def _feed(stream: trio.abc.SendStream, data: bytes) -> None:
    """Write ``data`` and close; a command that exits without reading it all is not an error."""
    try:
        async with stream:
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Capture:
    def __init__(self) -> None:
        self.buf = bytearray()
        self.dropped = 0

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        while chunk := await stream.receive_some(65536):
            room = SHELL_CAPTURE_LIMIT - len(self.buf)
            self.buf += chunk[:room]
            self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        s = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            s += f"\n[... {self.dropped} more bytes not captured]"
        return s


__all__ = ["LocalFS", "LocalShell", "ended_in", "tracked_script"]
