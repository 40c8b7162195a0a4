"""Failures a sandboxed command met that the live command would not have: told from its stderr.

The sandbox shows a command the host as it is, with four differences (docs/security.md): everything but
the project (the overlay's view) and the speculation's scratch ``/tmp`` is read-only; ``/var/tmp``, ``/run``
and the state dir are empty; the host's ``/tmp`` is replaced by the scratch space; and the command holds
no capability. So a write outside the project and the scratch space fails with EROFS, a file of the
host's ``/tmp``, ``/var/tmp`` or ``/run`` is missing (ENOENT), and root is refused (EACCES, EPERM) what its
capabilities would let it do live. The model must never go on from such a failure, nor may its speculation
be accepted with it: the live run would have gone another way (and written what the fork could not). So
each is a ``bash`` boundary (:func:`unmet_failure`); accepting runs the prompt live.

Told from the messages tools print on stderr (``touch: cannot touch '/etc/x': Read-only file system``,
``bash: line 1: c.txt: Permission denied``, Python's ``[Errno 30] Read-only file system: '/etc/x'``),
each checked against the host: a path on a file system the host mounts read-only fails live too, a file
missing from the host is missing live too, and a normal user refused what the host would refuse them is
refused live too. A failure a command swallows without a word is not seen (docs/security.md says so).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

EROFS, EACCES, EPERM, ENOENT = "EROFS", "EACCES", "EPERM", "ENOENT"
MESSAGES = {
    "Read-only file system": EROFS,
    "Permission denied": EACCES,
    "Operation not permitted": EPERM,
    "No such file or directory": ENOENT,
}
SCRATCH = "/tmp"  # the sandbox's scratch space: the host's /tmp is not what the command sees there
HIDDEN = ("/var/tmp", "/run")  # empty in the sandbox
_QUOTED = re.compile(r"'([^']+)'|‘([^’]+)’|\"([^\"]+)\"|`([^`']+)'")
_ABSOLUTE = re.compile(r"(?<![\w.~-])(/[^\s'\"‘’`:,;()\[\]]+)")
_PREFIXES = re.compile(
    r"^(cannot (create|open|touch|remove|access|stat|write to)( regular file| directory)?) "
)


@dataclass(frozen=True)
class Unmet:
    """One failure the live command would not have met: its kind (EROFS...), the path, and why."""

    kind: str
    path: str | None
    why: str

    def words(self) -> str:
        what = f"{self.kind} on {self.path}" if self.path else self.kind
        return f"{what}: {self.why}"


def unmet_failure(
    stderr: str, exit_code: int, *, project: str, cwd: str, root: bool | None = None
) -> Unmet | None:
    """The first failure in ``stderr`` that the live command would not have met, or None.

    ``project`` is the project's path (the view), ``cwd`` where the command started (relative paths);
    ``root`` whether speculate runs as root (default: this process's euid). A write refused as read-only
    outside the project counts whatever the exit status (the live run made that write; the compound command
    may still exit 0), and so does root refused inside the project; the others only when the command
    failed (exit status not 0), as a command that goes on after a missing file may not depend on it.
    """
    root = os.geteuid() == 0 if root is None else root
    project = os.path.abspath(project)
    for line in stderr.splitlines():
        for message, kind in MESSAGES.items():
            at = line.lower().find(message.lower())  # Go and Rust print "read-only file system"
            if at < 0:
                continue
            paths = _paths(line, line[at : at + len(message)], cwd)
            if not paths:
                if kind == ENOENT or exit_code == 0 or (kind == EPERM and not root):
                    continue  # a normal user is refused a privileged call (mknod, chown) live too
                why = (
                    "the sandbox refused it (the live command would have written outside the project)"
                    if kind == EROFS
                    else "the sandbox holds no capability and no unix socket; the live command may have met none"
                )
                return Unmet(kind, None, why)
            for path in paths:
                found = _judge(kind, path, project=project, root=root, failed=exit_code != 0)
                if found is not None:
                    return Unmet(kind, path, found)
    return None


def _paths(line: str, message: str, cwd: str) -> list[str]:
    """The paths a failure line names, absolute: quoted ones, absolute ones, and the word just before
    ``: MESSAGE`` (``cat: x: No such file``, ``bash: line 1: x: Permission denied``)."""
    found: list[str] = []
    prog, sep, rest = line.partition(": ")
    if sep and " " not in prog and f": {message}" in rest:  # "touch: ...", "/bin/bash: line 1: ..."
        line = rest
    for m in _QUOTED.finditer(line):
        found.append(next(g for g in m.groups() if g))
    found += _ABSOLUTE.findall(line)
    head = line.split(f": {message}", 1)[0]
    if head != line:
        last = head.rsplit(": ", 1)[-1].strip()
        last = _PREFIXES.sub("", last).strip("'\"‘’`")
        word = last.split()[-1].strip("'\"‘’`") if last.split() else ""
        if last and " " not in last and not last.startswith("[Errno"):
            found.append(last)
        elif "/" in word:  # "sed: couldn't open temporary file ./sedAb12: Permission denied"
            found.append(word)
    out: list[str] = []
    for p in found:
        if p.startswith("~"):
            p = os.path.expanduser(p)
        if not p.startswith("/"):
            if "/" not in p and "." not in p and not os.path.lexists(os.path.join(cwd, p)):
                continue  # a bare word that is no file name ("bash", "sudo"): not a path
            p = os.path.join(cwd, p)
        p = os.path.normpath(p)
        if p not in out:
            out.append(p)
    return out


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _existing(path: str) -> str | None:
    """``path`` or its nearest ancestor that exists on the host."""
    p = path
    while True:
        if os.path.lexists(p):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def _read_only_on_host(path: str) -> bool:
    near = _existing(path)
    if near is None:
        return False
    try:
        return bool(os.statvfs(near).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _judge(kind: str, path: str, *, project: str, root: bool, failed: bool) -> str | None:
    """Why the live command would not have met ``kind`` on ``path`` (None: it would have, or cannot tell)."""
    inside = _under(path, project) or _under(path, os.path.realpath(project))
    if kind == EROFS:
        if _read_only_on_host(path):
            return None
        if inside:
            return "the project is writable on the host"
        near = _existing(path)
        if not root and near is not None and not os.access(near, os.W_OK):
            return None  # live, the host refuses this user the write (EACCES): a failure there too
        return (
            "a write outside the project and the speculation's scratch /tmp, which the sandbox refuses; "
            "the live command would have made it"
        )
    if kind in (EACCES, EPERM):
        if root and inside:
            return (
                "root without capabilities in the sandbox; live, root may write and read any file of the "
                "project (another user's included)"
            )
        if inside or not failed:
            return None  # the view has the host's owners and modes: a normal user meets the same refusal
        near = _existing(path)
        if near is None:
            return None
        if root:
            return "root without capabilities in the sandbox; live, root would have been let through"
        if os.access(near, os.W_OK) and (near == path or os.path.isdir(near)):
            return "the host lets this user write there; the sandbox does not"
        return None
    # ENOENT: only where the sandbox hides what the host has
    if not failed or inside:
        return None
    hidden = _under(path, SCRATCH) or any(_under(path, d) for d in HIDDEN)
    if hidden and os.path.lexists(path):
        return "the host has it; the sandbox's /tmp is the speculation's scratch space, /var/tmp and /run are empty"
    return None
