"""Calls a fork made that the live path would have asked about, and asking about them on acceptance.

In a fork, a sandboxed Bash command the permission gate would *ask* about (``rm -rf build`` in default
mode, ``python -m pytest -q`` in acceptEdits) runs in the sandbox and is recorded here as a
:class:`PendingApproval`: the question the live path would ask (``Bash(rm -rf build)``), and what the
command changed in the overlay. So is a Write or Edit the live path would ask about, where the session defers
edits (``SessionConfig.spec_edits = "ask"``): it is written into the overlay, and the question on acceptance
shows its diff (the file before and after the call, in the overlay). On acceptance, before anything is promoted or replayed, the session's
approval policy sees them all: no, and the speculation is discarded and the turn runs live, asking as
usual; yes, and they count as answered (once, as a ``y`` to each would); ``always`` also adds each
command's allow rule, as that answer does on the live path.

An :data:`ApproveFn` answers for the whole set (the REPL shows them and asks once). Without one (the API's
default, and a study's, where no question may tell the arm), the session's ``ask`` callback is asked about
each call in turn, exactly as the live path would ask it (:func:`ask_each`), and a live turn after a no
takes the answers given instead of asking them again; with no one to ask, the live path would refuse, so the
speculation is discarded.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from overlayfs.changes import Change
from speculate.speculation.effects import FileSummary, Snapshot, attribute, snapshot, summarize, touched
from speculate.tools.registry import SHELL_TOOLS

Answer = Literal["y", "n", "always"]
AskFn = Callable[[str, str], Awaitable[Answer]]


@dataclass
class PendingApproval:
    """One call the live path would have asked about, run in the fork."""

    tool: str
    summary: str  # what the live question names: "Bash(rm -rf build)"
    command: str
    reason: str  # the gate's: why it would ask
    tool_use_id: str
    before: Snapshot | None = field(default=None, repr=False)
    changes: list[Change] = field(default_factory=list)
    files: FileSummary = field(default_factory=FileSummary)
    finished: bool = False  # the call returned (else it was still running when this was read)
    input: dict[str, Any] = field(default_factory=dict, repr=False)  # the call's arguments (the question's)
    path: str | None = None  # a deferred edit's file (as the call names it)
    before_text: str | None = field(default=None, repr=False)  # that file before the call (None: absent)
    diff: str = ""  # a deferred edit's unified diff, once measured

    @property
    def rule(self) -> str:
        """The allow rule an ``always`` answer adds (the live path's)."""
        return f"{self.tool}({self.command})" if self.tool in SHELL_TOOLS and self.command else self.tool

    def effect(self) -> str:
        """What it changed in the overlay: ``deleted build/`` (hooks around it included)."""
        return self.files.words() + ("" if self.finished else " (so far: it was still running)")

    def line(self) -> str:
        """``Bash(rm -rf build): deleted build/`` for the record."""
        return f"{self.summary}: {self.effect()}"


ApproveFn = Callable[[Sequence[PendingApproval]], Awaitable[Answer]]


class Approvals:
    """The fork's pending approvals, with the overlay they are measured on."""

    def __init__(self, overlay: Any) -> None:
        self.overlay = overlay
        self.pending: list[PendingApproval] = []

    def expect(
        self,
        tool: str,
        summary: str,
        command: str,
        reason: str,
        tool_use_id: str,
        *,
        input: dict[str, Any] | None = None,
        path: str | None = None,
    ) -> None:
        """A call the live path would ask about is about to run: note the upper layer before it (and, for an
        edit, the file's text)."""
        p = PendingApproval(
            tool,
            summary,
            command,
            reason,
            tool_use_id,
            before=snapshot(self.overlay.upper),
            input=dict(input or {}),
            path=path,
        )
        if path is not None:
            p.before_text = _text(self.overlay, path)
        self.pending.append(p)

    def finish(self, tool_use_id: str) -> None:
        """The call returned: what it changed is the difference in the upper layer (hooks around it included)."""
        for p in self.pending:
            if p.tool_use_id == tool_use_id and not p.finished:
                self._measure(p)
                p.finished = True

    def settle(self) -> list[PendingApproval]:
        """Every pending approval with its changes measured (a call still running: what it changed so far)."""
        for p in self.pending:
            if not p.finished and self.overlay is not None and not self.overlay.discarded:
                self._measure(p)
        return list(self.pending)

    def _measure(self, p: PendingApproval) -> None:
        if p.before is None:
            return
        paths, replaced = touched(p.before, snapshot(self.overlay.upper))
        p.changes = attribute(self.overlay.changes(), paths, replaced) if paths else []
        p.files = summarize(p.changes)
        if p.path is not None:
            p.diff = edit_diff(p.before_text, _text(self.overlay, p.path), self._name(p.path))

    def _name(self, path: str) -> str:
        root = str(getattr(self.overlay, "root", "") or "")
        return path[len(root) + 1 :] if root and path.startswith(root + "/") else path


# A deferred edit's diff is shown whole up to this size per side; past it, a line says how much changed.
DIFF_TEXT_BYTES = 256 * 1024


def _text(fs: Any, path: str) -> str | None:
    """The file's text in the merged view, None when absent; a file past the bound or not text: a marker."""
    try:
        data = fs.read_bytes(path)
    except OSError:
        return None
    if len(data) > DIFF_TEXT_BYTES:
        return f"\0{len(data)}"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return f"\0{len(data)}"


def edit_diff(before: str | None, after: str | None, name: str) -> str:
    """The unified diff of one deferred edit (``a/name`` → ``b/name``); a file too large or not text is
    summarised in a line."""
    if (before or "").startswith("\0") or (after or "").startswith("\0"):
        return f"{name}: a large or binary file changed (diff left out)"
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        "/dev/null" if before is None else f"a/{name}",
        f"b/{name}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def distinct(pending: Sequence[PendingApproval]) -> list[PendingApproval]:
    """One per question (the live path asks a repeated command again only after a ``y``; the set of
    questions is what parity keeps)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for p in pending:
        if (p.tool, p.summary) not in seen:
            seen.add((p.tool, p.summary))
            out.append(p)
    return out


async def ask_each(
    pending: Sequence[PendingApproval],
    ask: AskFn | None,
    remember: Callable[[PendingApproval], None],
    showing: Callable[[PendingApproval | None], None] = lambda p: None,
    given: list[tuple[str, str, Answer]] | None = None,
) -> Answer:
    """The default policy: the live path's questions through the session's ``ask``, one by one; the first
    ``n`` declines (the rest are not asked); ``always`` adds that command's allow rule as it would live.
    ``showing(p)`` is told which call is being asked about (None after), as the live gate says which call
    its question is about (the REPL shows its arguments and an edit's diff). ``given`` collects each
    question and its answer, in order."""
    if ask is None:
        return "n"
    answers = []
    allowed: set[tuple[str, str]] = set()
    for p in pending:  # each call, as the live path asks a repeated command again after a y, not after always
        if (p.tool, p.summary) in allowed:
            continue
        showing(p)
        try:
            a = await ask(p.tool, p.summary)
        finally:
            showing(None)
        if given is not None:
            given.append((p.tool, p.summary, a))
        if a == "n":
            return "n"
        if a == "always":
            remember(p)
            allowed.add((p.tool, p.summary))
        answers.append(a)
    return "always" if answers and all(a == "always" for a in answers) else "y"
