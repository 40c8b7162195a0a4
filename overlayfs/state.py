"""Per-user state of each project: the promotion journal, the promotion lock and the speculation overlays.

Everything a later process needs to finish or undo an interrupted promotion must be found from the project
path alone, so it lives in a per-user directory keyed by the project's real path, never in a random temp
dir and never inside the project::

    $SPECULATE_STATE_DIR (else $XDG_STATE_HOME/speculate, else ~/.local/state/speculate)
      projects/<sha256(realpath)[:16]>/           (and <that>.<token>/: a journal set aside, see
                                                   overlayfs.leftovers, with project and identity only)
        project           the project's real path (so a sweep can tell which tree it belongs to)
        identity          "<st_dev> <st_ino>" of that directory (a moved project is found by it)
        lock              flock(2)ed during promotion and recovery: one promoter per project at a time
        promote.journal   the plan and state of a promotion in flight; empty otherwise (overlayfs.journal)
        overlays/<pid>.<start>.<random>/   default overlays (upper/ work/ meta/), named by their owner;
                                           ".spent" appended while a discarded one is being deleted

The names are speculate's (this package ships with it); the package itself does not import speculate.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from overlayfs.errors import OverlayError

ENV = "SPECULATE_STATE_DIR"
LOCK_TIMEOUT = 30.0  # seconds a promotion or recovery waits for another process's promotion to end


def state_root() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).absolute()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "speculate"


class ProjectLocked(OverlayError, TimeoutError):
    """Another process held the project's promotion lock for longer than the timeout."""


@dataclass(frozen=True)
class ProjectState:
    project: Path  # the project's real path
    dir: Path

    @property
    def journal(self) -> Path:
        return self.dir / "promote.journal"

    @property
    def lock_path(self) -> Path:
        return self.dir / "lock"

    @property
    def overlays(self) -> Path:
        return self.dir / "overlays"


def pending(ps: ProjectState) -> bool:
    """Whether a promotion journal is pending (the journal file is kept, empty when nothing is)."""
    try:
        return os.stat(ps.journal).st_size > 0
    except FileNotFoundError:
        return False


def project_state(project: str | os.PathLike[str]) -> ProjectState:
    real = Path(os.path.realpath(project))
    key = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return ProjectState(real, state_root() / "projects" / key)


def ensure(ps: ProjectState) -> None:
    """Create the project's state dir (private to the user) and record which project it belongs to."""
    if ps.dir.is_relative_to(ps.project) or ps.project.is_relative_to(ps.dir.parent.parent):
        raise ValueError(
            f"the state dir {ps.dir} and the project {ps.project} must not contain each other "
            f"(set {ENV} elsewhere)"
        )
    ps.overlays.mkdir(mode=0o700, parents=True, exist_ok=True)
    marker = ps.dir / "project"
    if not marker.exists():
        _write(marker, os.fsencode(ps.project))
    try:
        st = os.stat(ps.project)
    except OSError:
        return
    ident = f"{st.st_dev} {st.st_ino}\n".encode()
    try:
        same = (ps.dir / "identity").read_bytes() == ident
    except FileNotFoundError:
        same = False
    if not same:
        _write(ps.dir / "identity", ident)


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@contextmanager
def locked(ps: ProjectState, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the project's promotion lock. ``timeout`` 0 tries once; ProjectLocked names the holder."""
    ensure(ps)
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        fd = os.open(ps.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                raise ProjectLocked(
                    errno.ETIMEDOUT,
                    f"another process ({_holder(ps)}) is promoting into or "
                    f"recovering the project; gave up after {timeout:g} s",
                    str(ps.project),
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
            continue
        try:  # tidy() may have unlinked the file we locked: then lock the one at the path now
            if os.fstat(fd).st_ino == os.stat(ps.lock_path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
        ensure(ps)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _holder(ps: ProjectState) -> str:
    try:
        return f"pid {int(ps.lock_path.read_text().strip())}"
    except (OSError, ValueError):
        return "pid unknown"


# -- overlays owned by a process --------------------------------------------------------------------------


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (pid plus this is unique across pid reuse)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b") ", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "0"


_SELF = f"{os.getpid()}.{_start_time(os.getpid())}"


def self_token() -> str:
    """``<pid>.<start time>``: names this process across pid reuse."""
    global _SELF
    if not _SELF.startswith(f"{os.getpid()}."):  # forked since import
        _SELF = f"{os.getpid()}.{_start_time(os.getpid())}"
    return _SELF


def new_overlay_dir(ps: ProjectState) -> Path:
    """A fresh base dir for one overlay, named by this process so that a later one can tell it is stale."""
    ensure(ps)
    return Path(tempfile.mkdtemp(prefix=self_token() + ".", dir=ps.overlays))


def owner_alive(name: str) -> bool:
    """Whether the process that created overlay dir ``name`` still runs (unparsable names count as alive)."""
    try:
        pid_s, start, _ = name.split(".", 2)
        pid = int(pid_s)
    except ValueError:
        return True
    if start == "0":  # no /proc when it was made
        return _exists(pid)
    return _start_time(pid) == start


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_overlays(ps: ProjectState) -> list[Path]:
    try:
        names = os.listdir(ps.overlays)
    except FileNotFoundError:
        return []
    return [ps.overlays / n for n in sorted(names) if not owner_alive(n)]


def _gone_is_fine(func: object, path: str, exc: BaseException | tuple[object, BaseException, object]) -> None:
    e = exc if isinstance(exc, BaseException) else exc[1]  # onexc passes the exception, onerror exc_info()
    if not isinstance(e, FileNotFoundError):  # someone else deleting the same tree: fine
        raise e


_RMTREE_ERR = {"onexc": _gone_is_fine} if sys.version_info >= (3, 12) else {"onerror": _gone_is_fine}


def remove_tree(path: Path) -> None:
    """rmtree that also gets through read-only directories a speculation made (they block unlink unless root)."""
    if not os.path.lexists(path):
        return
    try:
        shutil.rmtree(path, **_RMTREE_ERR)  # type: ignore[arg-type]  # onexc or onerror, by version
        return
    except OSError:
        pass
    os.chmod(path, 0o700)
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            if not os.path.islink(f"{dirpath}/{d}"):
                os.chmod(f"{dirpath}/{d}", 0o700)
    shutil.rmtree(path, **_RMTREE_ERR)  # type: ignore[arg-type]  # onexc or onerror, by version


_disposals: list[tuple[Path, threading.Thread]] = []


def dispose(path: Path, aside: Path) -> None:
    """Delete a tree nobody needs any more without waiting for it: rename it to ``aside`` (same filesystem,
    O(1)), then remove that on a daemon thread. A process that dies first leaves ``aside`` to a sweep."""
    try:
        os.rename(path, aside)
    except OSError:  # another filesystem (or already gone): remove it here
        remove_tree(path)
        return
    remove_later(aside)


def remove_later(path: Path) -> None:
    """Remove the tree ``path`` (outside any project, nobody's any more) on a daemon thread."""
    t = threading.Thread(target=_remove_quietly, args=(path,), name="overlayfs-dispose", daemon=True)
    t.start()
    _disposals[:] = [(p, d) for p, d in _disposals if d.is_alive()] + [(path, t)]


def wait_disposals(under: Path | None = None) -> None:
    """Wait for the background deletions (of trees under ``under`` only, if given)."""
    for p, t in list(_disposals):
        if under is None or p.is_relative_to(under):
            t.join()


def _remove_quietly(path: Path) -> None:
    try:
        remove_tree(path)
    except OSError:
        pass  # the next sweep of stale overlays (or the overlay's own discard) gets it


def tidy(ps: ProjectState) -> None:
    """Remove the project's state dir if nothing is pending in it (no journal, no overlay)."""
    wait_disposals(ps.dir)
    if not ps.dir.exists() or pending(ps):
        return
    try:
        with locked(ps, timeout=0):
            if pending(ps):
                return
            try:
                os.rmdir(ps.overlays)
            except FileNotFoundError:
                pass
            for name in (ps.journal, ps.journal.with_name(ps.journal.name + ".tmp")):
                try:
                    os.unlink(name)
                except FileNotFoundError:
                    pass
            os.unlink(ps.lock_path)  # lockers compare inodes, so removing it while held is safe
            os.unlink(ps.dir / "project")
            try:
                os.unlink(ps.dir / "identity")
            except FileNotFoundError:
                pass
            os.rmdir(ps.dir)
    except OSError:
        pass  # busy, or something appeared meanwhile: keep it
