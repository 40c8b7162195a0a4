"""The project's starting tree, as far as the transcript shows it, and each file's state along the session.

Only what the transcript already holds is used: a full Read's recorded content (Claude Code records it in
``toolUseResult.file``; a transcript without ``toolUseResult`` has only the numbered text the model saw, read
back line by line when it shows the whole file), the ``originalFile`` an Edit or an updating Write records,
and a creating Write (the file did not exist). A file first seen after edits is recovered by undoing those edits from the seen
content (each ``new_string`` back to its ``old_string``); an undo that is ambiguous gives up on that file.
Shell commands may change files too; their effects are unknown, so the first content seen counts as the
start. Alternatively the user names the tree: ``--repo DIR --rev REV`` exports that revision (:func:`export`).

:class:`Replayed` then follows the files the way a replay will: from the starting tree, applying each
scripted Edit and Write, so the checks (:mod:`.checks`) expect only what the replay can show.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculate.errors import SpeculateError
from speculate.importers.sessions import Counts, RecordedTurn, ToolUse

UNKNOWN = object()  # a file the replay has, in a state the transcript does not show
MISSING = object()  # a file the transcript never shows: the reconstructed tree, so the replay, lacks it
FileState = Any  # str (content), None (absent), UNKNOWN or MISSING
# A line of a Read's result as the model saw it: "N\tline" (2.1.x) or "     N→line" (1.0.x).
_NUMBERED = re.compile(r"^\s*(\d+)(?:\t|\u2192)(.*)$")
READ_LIMIT = 2000  # Claude Code's Read shows at most this many lines unless asked for more
_REMINDER = "\n\n<system-reminder>"  # appended to a Read's result by some versions


class RepoError(SpeculateError, ValueError):
    """``--repo``/``--rev`` cannot be exported; the message names both."""


def project_path(path: object, cwd: str | None) -> str | None:
    """``path`` relative to the project root ``cwd``, or None when it is outside (or not a path)."""
    if not isinstance(path, str) or not path or cwd is None:
        return None
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    root = os.path.normpath(cwd)
    if full == root or not full.startswith(root.rstrip("/") + "/"):
        return None
    return os.path.relpath(full, root)


def recorded_file(use: ToolUse) -> bool:
    """Whether a Read's ``toolUseResult`` holds the file (2.1.x: ``{"type": "text", "file": {...}}``); when
    not (no ``toolUseResult``, or an older shape), only its numbered text shows what it read."""
    r = use.result
    return r is not None and isinstance(r.structured, dict) and isinstance(r.structured.get("file"), dict)


def text_read(use: ToolUse) -> str | None:
    """The whole file a successful Read showed, from its numbered text, for a transcript that recorded no
    ``toolUseResult`` (or one in an older shape): None for a window of the file, a truncated one, or text
    that is not numbered lines."""
    r = use.result
    if r is None or r.is_error or r.images:
        return None
    if use.input.get("offset") not in (None, 0, 1) or use.input.get("limit") is not None:
        return None
    shown = r.text.split(_REMINDER, 1)[0]
    lines = shown.split("\n")
    if not shown or len(lines) >= READ_LIMIT:
        return None
    out = []
    for i, line in enumerate(lines, start=1):
        m = _NUMBERED.match(line)
        if m is None or int(m.group(1)) != i:
            return None
        out.append(m.group(2))
    return "\n".join(out)


def full_read(use: ToolUse) -> str | None:
    """The whole file a successful Read recorded (None for a window of it, an image or an error)."""
    r = use.result
    if not recorded_file(use):
        return text_read(use)
    if r is None or r.is_error or not isinstance(r.structured, dict) or r.structured.get("type") != "text":
        return None
    f = r.structured.get("file")
    if not isinstance(f, dict) or not isinstance(f.get("content"), str):
        return None
    if f.get("startLine", 1) != 1 or f.get("numLines") != f.get("totalLines"):
        return None
    return str(f["content"])


def recorded_read(use: ToolUse) -> str | None:
    """The text a successful Read returned, without line numbers (a window of the file, or all of it)."""
    r = use.result
    if not recorded_file(use):
        return text_read(use)
    if r is None or r.is_error or not isinstance(r.structured, dict) or r.structured.get("type") != "text":
        return None
    f = r.structured.get("file")
    return str(f["content"]) if isinstance(f, dict) and isinstance(f.get("content"), str) else None


def _structured(use: ToolUse) -> dict[str, Any]:
    r = use.result
    return r.structured if r is not None and isinstance(r.structured, dict) else {}


def _ok(use: ToolUse) -> bool:
    return use.result is not None and not use.result.is_error


def _undo(content: str, edits: list[tuple[str, str, bool]]) -> str | None:
    """Undo ``edits`` (old, new, replace_all; oldest first) from the content after them; None if ambiguous."""
    for old, new, every in reversed(edits):
        if every or not new or content.count(new) != 1:
            return None
        content = content.replace(new, old, 1)
    return content


def tool_uses(turns: Iterable[RecordedTurn]) -> list[ToolUse]:
    return [u for t in turns for s in t.steps for u in s.tools]


@dataclass
class StartingTree:
    """Relative path -> content at the start (None: the file did not exist), for the files the transcript
    shows; the others are unknown."""

    files: dict[str, str | None] = field(default_factory=dict)
    unrecovered: set[str] = field(default_factory=set)

    def state(self, rel: str) -> FileState:
        return self.files[rel] if rel in self.files else MISSING


def reconstruct(turns: list[RecordedTurn], cwd: str | None, counts: Counts) -> StartingTree:
    tree = StartingTree()
    pending: dict[str, list[tuple[str, str, bool]]] = {}  # edits seen while the file was unknown
    blocked: set[str] = set()  # overwritten before anything showed its start

    def found(rel: str, content: str) -> None:
        start = _undo(content, pending.get(rel, []))
        if start is None:
            tree.unrecovered.add(rel)
            blocked.add(rel)
        else:
            tree.files[rel] = start

    for use in tool_uses(turns):
        rel = project_path(use.input.get("file_path"), cwd)
        if rel is None or rel in tree.files or rel in blocked or not _ok(use):
            continue
        s = _structured(use)
        if use.name == "Read":
            content = full_read(use)
            if content is not None:
                if not recorded_file(use):
                    counts["Reads read back from their numbered text (no toolUseResult)"] += 1
                found(rel, content)
        elif use.name == "Edit":
            if isinstance(s.get("originalFile"), str):
                found(rel, s["originalFile"])
            else:
                pending.setdefault(rel, []).append(
                    (
                        str(use.input.get("old_string", "")),
                        str(use.input.get("new_string", "")),
                        bool(use.input.get("replace_all")),
                    )
                )
        elif use.name == "Write":
            if s.get("type") == "create" and not pending.get(rel):
                tree.files[rel] = None
            elif isinstance(s.get("originalFile"), str):
                found(rel, s["originalFile"])
            else:
                blocked.add(rel)
    if tree.unrecovered:
        counts["files whose start could not be recovered (ambiguous edits)"] += len(tree.unrecovered)
    return tree


class Replayed:
    """File states as the replay will have them, call by call: ``before(use)`` is the state a call sees."""

    def __init__(self, start: Callable[[str], FileState], cwd: str | None) -> None:
        self.start = start
        self.cwd = cwd
        self.now: dict[str, FileState] = {}

    def state(self, rel: str) -> FileState:
        return self.now[rel] if rel in self.now else self.start(rel)

    def apply(self, use: ToolUse) -> FileState:
        """The state ``use``'s file had before it; then apply it (a scripted Edit or Write)."""
        rel = project_path(use.input.get("file_path"), self.cwd)
        if rel is None:
            return UNKNOWN
        before = self.state(rel)
        if use.name == "Write" and isinstance(use.input.get("content"), str):
            self.now[rel] = use.input["content"]
        elif use.name == "Edit":
            old, new = str(use.input.get("old_string", "")), str(use.input.get("new_string", ""))
            every = bool(use.input.get("replace_all"))
            if isinstance(before, str) and old and (before.count(old) == 1 or (every and old in before)):
                self.now[rel] = before.replace(old, new) if every else before.replace(old, new, 1)
            elif before is not MISSING:
                self.now[rel] = UNKNOWN  # the replay's Edit fails (or we cannot tell): stop predicting
        return before


def repo_reader(root: Path) -> Callable[[str], FileState]:
    """File states from an exported tree: its content, or None where it has no such file."""

    def read(rel: str) -> FileState:
        p = root / rel
        if not p.is_file():
            return None
        try:
            return p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return UNKNOWN

    return read


def export(repo: Path, rev: str, dest: Path) -> str:
    """Extract ``rev`` of the git repository at ``repo`` (its subtree, when ``repo`` is a subdirectory) into
    ``dest``; returns the full commit id."""

    def git(*args: str) -> bytes:
        try:
            out = subprocess.run(
                ["git", "-C", str(repo), *args], capture_output=True, check=True, timeout=300
            )
        except FileNotFoundError:
            raise RepoError("--repo: git is not installed") from None
        except subprocess.CalledProcessError as e:
            msg = e.stderr.decode(errors="replace").strip().splitlines()
            raise RepoError(f"--repo {repo} --rev {rev}: {msg[-1] if msg else 'git failed'}") from None
        return out.stdout

    if not repo.is_dir():
        raise RepoError(f"--repo {repo}: not a directory")
    git("rev-parse", "--git-dir")  # "not a git repository" before "no such revision"
    try:
        commit = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except RepoError:
        raise RepoError(f"--rev {rev}: no such commit in the git repository {repo}") from None
    data = git("archive", "--format=tar", commit)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        _extract(tar, dest)
    return commit


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")  # refuses absolute paths, .. and devices
        return
    # Python before 3.11.4 (Debian 12's /usr/bin/python3, the one a normal user there can run) has no
    # extraction filters: git archive writes none of these members, but refuse them as the filter would.
    for m in tar.getmembers():
        if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isreg() or m.isdir() or m.issym()):
            raise RepoError(f"git archive wrote {m.name!r}: not a file, directory or link inside the tree")
    tar.extractall(dest)
