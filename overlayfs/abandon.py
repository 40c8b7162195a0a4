"""``speculate recover --abandon``: forget an interrupted promotion and keep the real tree as it is, saying
which of its files are new and which old, and keeping every temp name that may be the only copy of an
old version (the backup of a file already replaced, an entry already removed).

What goes: everything of an interrupted ``prepare`` (nothing had landed), the backups and trash after
``finish`` (everything had landed), and after the commit point the backup of a file that was not replaced
(a link to, or a copy of, the file still in place) and the staged copies not moved in (the new versions
the user chose not to land). What is kept is listed in the message and in
``<state dir>/abandoned/<token>.txt``; a later scan for leftovers (:mod:`overlayfs.leftovers`) leaves
those names alone.
"""

from __future__ import annotations

import filecmp
import os
import stat as stat_mod

from overlayfs import journal
from overlayfs.journal import Journal
from overlayfs.leftovers import SHOWN, abandoned_dir
from overlayfs.merged import lstat_or_none
from overlayfs.state import ProjectState
from overlayfs.steps import Steps


def _list(items: list[str]) -> str:
    return ", ".join(items[:SHOWN]) + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _same_file(a: str, b: str) -> bool:
    sa, sb = lstat_or_none(a), lstat_or_none(b)
    if sa is None or sb is None:
        return False
    if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
        return True
    if stat_mod.S_ISREG(sa.st_mode) and stat_mod.S_ISREG(sb.st_mode):
        return filecmp.cmp(a, b, shallow=False)
    if stat_mod.S_ISLNK(sa.st_mode) and stat_mod.S_ISLNK(sb.st_mode):
        return os.readlink(a) == os.readlink(b)
    return False


def abandon(ps: ProjectState, j: Journal | None) -> str:
    """Clear ``ps``'s journal ``j`` (None: unreadable) and return the line that says what the tree holds."""
    head = f"abandoned the interrupted acceptance of {ps.project}"
    if j is None:
        journal.clear(ps.journal)
        return f"{head} (its journal could not be read); the real tree is kept as it is"
    n = len(j["promoted"])
    head = f"abandoned an interrupted acceptance of {n} change{'' if n == 1 else 's'} into {ps.project}"
    s = Steps(j)
    if j["state"] in ("prepare", "finish"):
        if j["state"] == "prepare":
            s.rollback()
            what = "nothing of it had landed"
        else:
            s.finish()
            what = "all of it had landed"
        journal.clear(ps.journal)
        out = f"{head}; the real tree is kept as it is ({what})"
        if s.problems:
            out += f"; could not remove {len(s.problems)} temporary names: " + "; ".join(s.problems[:SHOWN])
        return out
    new, old, kept = _sort(s)
    out = f"{head}; the real tree is kept as it is, part new, part old. New: {_list(new) or 'none'}. "
    out += f"Old: {_list(old) or 'none'}"
    if kept:
        record = abandoned_dir() / f"{j['token']}.txt"
        record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        record.write_text(
            f"project {ps.project}\nnew {' '.join(new)}\nold {' '.join(old)}\n"
            + "".join(f"kept {k}\n" for k in kept)
        )
        out += (
            f". Kept {len(kept)} temporary name{'' if len(kept) == 1 else 's'} that may hold the only "
            f"copy of an old version: {_list(kept)} (delete {'it' if len(kept) == 1 else 'them'} once no "
            f"longer needed; all are listed in {record})"
        )
    if s.problems:
        out += f"; could not remove {len(s.problems)} temporary names: " + "; ".join(s.problems[:SHOWN])
    journal.clear(ps.journal)
    return out


def _sort(s: Steps) -> tuple[list[str], list[str], list[str]]:
    """Split the plan's paths into new and old as they stand; remove the temp names that provably hold
    nothing else; return (new, old, kept: "<temp name> (<what it holds>)")."""
    new: list[str] = []
    old: list[str] = []
    kept: list[str] = []
    for i, (rel, stage, backup, _, _) in enumerate(s.puts):
        if i in s.inplace:  # written into the file itself (overlayfs.inplace): never kept half-written
            _sort_in_place(s, i, new, old, kept)
            continue
        target = s.p(rel)
        put, st = s.staged[i], lstat_or_none(target)
        # What stands there is what the promotion staged (an undo may have put the old one back since).
        landed = (st is not None and st.st_ino == put[1]) if put is not None else s._landed(i)
        (new if landed else old).append(rel)
        if os.path.lexists(s.p(stage)):
            if landed:  # swapped in, and killed before the displaced old entry's name went
                if backup is not None and _same_file(s.p(backup), s.p(stage)):
                    s._remove(stage)
                else:
                    kept.append(f"{stage} (the old {rel})")
            else:  # the new version the user chose not to land (the overlay's upper layer had it)
                s._remove(stage)
        if backup is not None and os.path.lexists(s.p(backup)):
            if not landed and _same_file(s.p(backup), target):
                s._remove(backup)
            else:
                kept.append(f"{backup} (the old {rel})")
    for rel, _, trash, _, _ in s.rms:
        if os.path.lexists(s.p(trash)):
            if rel not in new:
                new.append(f"{rel} (removed)")
            kept.append(f"{trash} (the removed {rel})")
        elif rel not in new and os.path.lexists(s.p(rel)):
            old.append(f"{rel} (not removed)")
    for rel, _ in s.j["mkdirs"]:
        st = lstat_or_none(s.p(rel))
        if st is not None and stat_mod.S_ISDIR(st.st_mode) and rel not in new:
            new.append(f"{rel}/ (new directory)")
    return sorted(new), sorted(old), kept


def _sort_in_place(s: Steps, i: int, new: list[str], old: list[str], kept: list[str]) -> None:
    rel, stage, backup = s.puts[i][:3]
    problems = len(s.problems)
    if i in s.writing:  # begun: written whole from the staged copy; its backup is the only old copy
        s._tolerate(f"finish writing {s.p(rel)}", s.p(stage), s.complete_in_place, i)
        new.append(rel)
        if os.path.lexists(s.p(backup)):
            kept.append(f"{backup} (the old {rel})")
    else:  # never touched: the backup is a copy of what stands there
        old.append(rel)
        s._remove(backup)
    if len(s.problems) == problems:  # else the staged copy is kept for `speculate recover` to finish with
        s._remove(stage)
