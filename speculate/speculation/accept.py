"""Accepting a speculation: the steps between "the user took the suggestion" and "its work is the turn's".

The engine (:meth:`speculate.speculation.engine.SpeculationEngine.accept`) runs them in this order:

1. :func:`approve`: the calls the fork ran that the live path would have asked about
   (:mod:`speculate.speculation.approvals`) are put to the session's approval policy, before anything is
   replayed or promoted. No: the speculation is discarded and the turn runs live, asking as usual.
2. :func:`check`: a dry run of promotion's conflict check (and whether the overlay still exists), so that
   a speculation that will be discarded shows nothing of its transcript: the turn runs live at once, and
   says why.
3. :func:`replay`: what the fork showed so far goes to the session's event callback; a fork still running
   streams the rest live (and from now on asks at the call, as the live path does).
4. :func:`promote`: the overlay lands in the real tree (conflict-checked again, under the project's lock,
   all or nothing), and the record names what landed as files written, deleted and renamed. What the
   person sees of the outcome (:class:`Landing`) says, when the turn is cancelled, whether it landed.

What the engine hands back is an :class:`Acceptance`, a decision the session acts on: the promoted messages
and what to run next (nothing, the rest of the turn live, or the whole prompt live). The engine runs no
turn and touches no conversation of the session's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from overlayfs.conflicts import find_conflicts
from overlayfs.policy import refusals
from speculate.speculation.approvals import Answer, ApproveFn, PendingApproval, ask_each
from speculate.speculation.effects import FileSummary, renames, summarize
from speculate.speculation.events import Approval, SpecOutcome, SpeculationRecord
from speculate.types import Message

if TYPE_CHECKING:
    from speculate.models.base import Usage
    from speculate.speculation.authorize import MainAuthorizer
    from speculate.speculation.fork import Speculation

DECLINED = "speculation discarded: what it ran was not approved; running normally"

# What the session runs after an acceptance: ``done``, nothing (the fork completed the turn; its messages
# are the turn's); ``resume``, the rest of the turn live from the promoted messages (the fork stopped at a
# boundary, which the live loop proposes again under the live rules); ``live``, the prompt as a normal
# turn (nothing of the speculation was used; ``note`` says why, when there was one).
Action = Literal["done", "resume", "live"]


@dataclass
class Acceptance:
    """The engine's decision on an accepted suggestion; the session acts on it (and checks that its
    conversation is still ``prefix_len`` messages long, where the fork started)."""

    action: Action
    note: str = ""
    record: SpeculationRecord | None = None  # the speculation used (None: ``live``)
    messages: list[Message] = field(default_factory=list)  # promoted: to append to the conversation
    prefix_len: int = 0
    shell_dir: Path | None = None  # where the fork's Bash ended: the session's goes on from there
    last_usage: Usage | None = None  # ``done``: the fork's last response's, standing for the turn's


async def approve(spec: Speculation, *, policy: ApproveFn | None, main: MainAuthorizer) -> Answer | None:
    """Put the fork's pending approvals to ``policy`` (None: ``main``'s ask, question by question, as the
    live path would). None when there were none; the answer otherwise, recorded."""
    pending = spec.approvals.settle() if spec.approvals is not None else []
    if not pending:
        return None
    spec.record.approvals = [p.line() for p in pending]

    def remember(p: PendingApproval) -> None:
        main.remember(p.rule)

    def showing(p: PendingApproval | None) -> None:
        from speculate.speculation.authorize import Question

        main.question = None if p is None else Question(p.tool, p.input, p.rule)

    if policy is None:
        given: list[tuple[str, str, Answer]] = []
        answer = await ask_each(pending, main.ask, remember, showing, given)
        if answer == "n":  # the turn runs live: the questions already answered are not asked again
            main.carry(given)
    else:
        answer = await policy(pending)
        if answer == "always":
            for p in pending:
                remember(p)
    approvals: dict[Answer, Approval] = {"y": "approved", "always": "always", "n": "declined"}
    spec.record.approval = approvals[answer]
    return answer


@dataclass
class Promotion:
    ok: bool
    outcome: SpecOutcome = "accepted"
    note: str = ""


@dataclass
class Landing:
    """An accepted speculation, as far as the real tree is concerned: ``promoted`` once its files landed
    (``files`` names them); until then nothing of it has (a cancelled turn says which)."""

    suggestion: str
    promoted: bool = False
    files: FileSummary = field(default_factory=FileSummary)
    diff: str = ""  # what it changed, as a unified diff (kept when the session asks for it: /diff)
    dropped: str = ""  # why it was discarded after all (the turn then ran live)


def check(spec: Speculation) -> Promotion | None:
    """Before anything of it is shown: would promotion discard it? The same conflict check promotion runs
    (which runs it again under the project's lock), without writing anything; None when it would land so
    far. A fork already finished without an overlay (a boundary that holds its cause) is discarded too."""
    ov = spec.overlay
    if ov is None:
        if spec.finished.is_set():
            return Promotion(False, "aborted", stopped_note(spec.record))
        return None
    if ov.sandbox is not None:  # the fork's last command may still be writing: the bases of what it wrote
        ov.sandbox.record_so_far()
    bases = ov.bases()
    changes = ov.changes()
    conflicts, _ = find_conflicts(ov.lower, {c.path for c in changes} | set(bases), bases, ov.reads())
    conflicts += refusals(str(ov.lower), str(ov.upper), changes)
    return (
        Promotion(False, "conflict", conflict_note(sorted(conflicts, key=lambda c: c.path)))
        if conflicts
        else None
    )


def stopped_note(rec: Any, *, shown: bool = False) -> str:
    """Why a fork that kept nothing to land (it stopped holding what made its boundary: a protected path
    written, a hook that failed, its bounds; or before it began) is not used: the turn runs live."""
    detail = f": {rec.boundary_detail[:200]}" if rec.boundary_detail else ""
    return (
        f"speculation discarded: it stopped at a boundary ({rec.boundary}{detail}); nothing of "
        + ("what it showed" if shown else "it")
        + " was applied; running normally"
    )


def conflict_note(conflicts: Any) -> str:
    """Each path with its own reason: the user changed a file, or acceptance never lands what stands there
    (overlayfs.policy: a FIFO, a link out of the project)."""
    return (
        "speculation discarded, nothing of it landed: "
        + "; ".join(f"{c.path}: {c.reason}" if hasattr(c, "reason") else str(c) for c in conflicts)
        + "; running normally"
    )


def replay(spec: Speculation, on_event: Callable[[Any], None]) -> None:
    """What the fork already did, then the rest live."""
    for e in spec.shown:
        on_event(e)
    spec.live = on_event


def promote(spec: Speculation) -> Promotion:
    """Land the overlay; fill the record's promotion time and the files it changed."""
    rec = spec.record
    tp = time.perf_counter()
    try:
        # Renames are told apart from a deletion and an addition by content, which only the real tree
        # still holds before promotion.
        pairs = (
            spec.renames
            if spec.renames is not None
            else renames(spec.overlay.changes(), spec.overlay.lower, spec.overlay.upper)
        )
        result = spec.overlay.promote()
    except OSError as e:  # rolled back (disk full, no permission), or another session held the lock
        rec.promote_s = time.perf_counter() - tp
        return Promotion(
            False, "error", f"speculation discarded: accepting it failed ({e}); running normally"
        )
    rec.promote_s = time.perf_counter() - tp
    if result.conflicts:
        return Promotion(False, "conflict", conflict_note(result.conflicts))
    files = summarize(result.promoted, pairs)
    rec.files_written, rec.files_deleted, rec.files_renamed = files.written, files.deleted, files.renamed
    # Everything landed, but some of our temporary names could not be removed yet (the next start does it).
    return Promotion(True, note="; ".join(result.notes))


def summary_of(rec: Any) -> FileSummary:
    """A record's promoted files, as :class:`FileSummary` (the REPL's accepted line)."""
    return FileSummary(list(rec.files_written), list(rec.files_deleted), list(rec.files_renamed))
