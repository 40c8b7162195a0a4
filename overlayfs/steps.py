"""The steps of one promotion journal on the real tree: prepare, rollback, apply, undo, finish, abandon.

Each step tells "done" from "to do" by what stands on disk, never by replaying blindly, so every one can be
repeated after a crash at any point (see :mod:`overlayfs.journal` for the protocol).

**The commit point holds per file.** The conflict check runs once, before the copies; the user may edit a
file during the seconds the copies take. So every real entry that promotion replaces or removes carries the
stamp (:mod:`overlayfs.stamps`) the conflict check saw, and that stamp is compared again: before its backup
link is made, once more for every target at the end of prepare, and immediately before its own swap in
apply, after which what the swap displaced is compared too (``RENAME_EXCHANGE``). An entry created where
the plan found nothing is never overwritten either (``RENAME_NOREPLACE``). A mismatch raises
:class:`~overlayfs.stamps.Changed`, and the whole promotion is rolled back or undone and reported as a
conflict naming the file. What stays is described in docs/overlay.md, "The commit point, per file".

**Cleanup never stops at the first error.** ``rollback``, ``undo``, ``finish`` and ``abandon`` do whatever
they can and collect what they could not do in ``problems`` (a read-only or vanished filesystem must not
turn one failed acceptance into a project nobody can recover).
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import time
from collections.abc import Callable
from typing import Any

from overlayfs.cleanup import Cleanup
from overlayfs.copyup import copy_file, kept_owner, link_or_copy, run_all, stat_mode
from overlayfs.flush import Flush
from overlayfs.inplace import InPlace, kept_acl
from overlayfs.merged import kind_of, lstat_or_none
from overlayfs.stamps import Changed, Stamp, exchange, key, rename_noreplace, same, stamp, why

# The benchmark turns this off to measure promotion without the identity re-checks (bench/micro/accept_bench);
# nothing else may.
RECHECK = True
# Copies of at most this many bytes in all, none fsync'd on its own, run on the promoting thread.
SERIAL_BYTES = 1 << 20
# When a list, apply appends (time of an entry's last identity check, time it was swapped in or moved aside),
# perf_counter seconds, for each entry it replaces or removes (the benchmark measures the window with it).
WINDOWS: list[tuple[float, float]] | None = None


class Steps(Cleanup, InPlace):
    """The steps of one journal ``j``; ``at`` is the project path being worked on, for error messages."""

    def __init__(self, j: dict[str, Any]) -> None:
        self.j = j
        self.lower: str = j["lower"]
        self.at = "."
        self.problems: list[str] = []  # what a cleanup step could not do
        self.puts: list[list[Any]] = j["puts"]  # [rel, stage, backup, mode, stamp of the target or None]
        self.rms: list[list[Any]] = j["rms"]  # [rel, kind, trash, inode, stamp]
        seen = j.get("commit") or {}  # measured by prepare, written with the commit point
        n = len(self.puts)
        self.after_backup: list[Stamp | None] = seen.get("targets") or [None] * n
        self.staged: list[Stamp | None] = seen.get("staged") or [None] * n  # what each put landed as
        self.put_at = {p[0]: i for i, p in enumerate(self.puts)}
        self.check = RECHECK and bool(j.get("checks"))  # a journal planned without stamps is replayed without
        self.made = {rel for rel, _ in j["mkdirs"]}
        # Puts written into the real file's own inode (overlayfs.inplace), and those of them the journal
        # lists as begun ("writing [...]"): a replay rewrites those whole (overlayfs.inplace.InPlace).
        self.inplace: set[int] = set(j.get("inplace") or [])
        self.as_created: set[int] = set(j.get("as_created") or [])
        self.writing: set[int] = set(j.get("writing") or [])
        self.touched: set[int] = set()
        self.restore: set[int] | None = None if j.get("restore") is None else set(j["restore"])
        self.wrote: dict[int, os.stat_result] = {}  # what this process's in-place writes left
        # Set by overlayfs.journal: records "writing [...]" durably (as the plan says) before the writes.
        self.record: Callable[[list[int]], None] | None = None

    # -- identity --------------------------------------------------------------------------------------

    def _want(self, i: int) -> Stamp | None:
        return self.after_backup[i] or self.puts[i][4]

    def _expect(self, rel: str, want: Stamp | None) -> os.stat_result | None:
        st = lstat_or_none(self.p(rel))
        if self.check:
            now = None if st is None else stamp(st)[:6] + (want or [])[6:]  # the link count as it was
            if (now is None) != (want is None) or (
                now is not None and want is not None and key(now) != key(want)
            ):
                raise Changed(rel, why(want, st))
        return st

    def _ours(self, rel: str, st: os.stat_result) -> bool:
        """Whether the entry at ``rel`` is one this promotion put or made there."""
        i = self.put_at.get(rel)
        if i is not None and not stat_mod.S_ISDIR(st.st_mode):
            put = self.staged[i]
            return put is None or put[1] == st.st_ino  # a journal without stamps (older version): assume so
        return rel in self.made and stat_mod.S_ISDIR(st.st_mode)

    def verify(self) -> None:
        """Every target once more (the end of prepare: the copies may have taken seconds)."""
        removed = {r[0] for r in self.rms}
        for rel, _, _, _, want in self.rms:
            self._expect(rel, want)
        for i, put in enumerate(self.puts):
            if put[0] not in removed:  # an entry an rm removes first is checked through the rm
                self._expect(put[0], self._want(i))

    # -- before the commit point ------------------------------------------------------------------------

    def prepare(self) -> dict[str, Any]:
        """Stage everything; returns what the commit record keeps (the targets' stamps after their backup
        links, the staged entries' stamps)."""
        durable = self.j["durable"]
        with Flush(self.lower if durable else None) as flush:  # before the first write it makes durable
            return self._prepare(durable, flush)

    def _prepare(self, durable: bool, flush: Flush) -> dict[str, Any]:
        dirs = set()  # whose entries changed
        unsynced = []  # files whose data is not fsync'd where it is written
        for rel in self.j["pre"]:
            self.at = rel
            os.mkdir(self.p(rel), 0o700)  # its mode is set after the puts below it have landed
            dirs.add(os.path.dirname(self.p(rel)))
        copies: dict[int, tuple[str, str, int, bool, tuple[int, int] | None, bool, tuple[str, ...]]] = {}
        size = 0
        after: list[Stamp | None] = [None] * len(self.puts)
        for i, (rel, stage, backup, mode, want) in enumerate(self.puts):
            self.at = rel
            src, dst = f"{self.j['upper']}/{rel}", self.p(stage)
            st = os.lstat(src)
            old = self._expect(rel, want) if backup is not None else None
            if stat_mod.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(src), dst)
            else:
                # The file it replaces had holes: zero blocks stay holes (a FUSE fork wrote them out).
                holes = old is not None and old.st_blocks * 512 < old.st_size
                owner = kept_owner(st, st if i in self.as_created else old)  # as created: unless chown'd
                keep = kept_acl(self.p(rel), src) if old is not None else ()
                copies[i] = (src, dst, mode, durable, owner, holes, keep)
                size += min(st.st_size, st.st_blocks * 512)  # what is written: holes stay holes
            if backup is not None and i in self.inplace:  # the old bytes, in a new inode (a link would
                # change with the file): holes kept, owner and times as they were
                assert old is not None
                copy_file(
                    self.p(rel),
                    self.p(backup),
                    mode=stat_mode(old.st_mode),
                    times_ns=(old.st_atime_ns, old.st_mtime_ns),
                    owner=(old.st_uid, old.st_gid) if os.geteuid() == 0 else None,
                )
                unsynced.append(self.p(backup))
                after[i] = stamp(os.lstat(self.p(rel)))[:6] + want[6:]
            elif backup is not None:
                if not link_or_copy(self.p(rel), self.p(backup)):
                    unsynced.append(self.p(backup))  # a copy, not a link: its data too
                after[i] = stamp(os.lstat(self.p(rel)))[:6] + want[6:]  # the link moved its ctime
            dirs.add(os.path.dirname(dst))
        if durable and flush.plan(
            len(copies) + len(unsynced) + len(dirs), size
        ):  # then one syncfs covers them
            unsynced += [c[1] for c in copies.values()]
            copies = {i: (c[0], c[1], c[2], False, c[4], c[5], c[6]) for i, c in copies.items()}
        # The file copies run concurrently where they wait for the disk (a file fsync'd by its own thread:
        # the filesystem commits its journal once for many; then the directories) or copy much; small
        # copies into the page cache are cheaper one after the other.
        threads = size > SERIAL_BYTES or any(c[3] for c in copies.values())
        for i, err in zip(copies, run_all(_stage, list(copies.values()), threads=threads), strict=True):
            if err is not None:
                self.at = self.puts[i][0]
                raise err
        if durable:
            self.at = "."
            flush.sync([*unsynced, *dirs])
        self.after_backup = after
        if self.check:
            self.verify()
            self.staged = [stamp(os.lstat(self.p(put[1]))) for put in self.puts]
        return {"targets": after, "staged": self.staged}

    # -- after the commit point -------------------------------------------------------------------------

    def check_root(self) -> None:
        try:
            st = os.stat(self.lower)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "the project directory was removed", self.lower) from None
        if [st.st_dev, st.st_ino] != self.j["root"]:
            raise FileNotFoundError(errno.ENOENT, "the project directory was replaced", self.lower)

    def apply(self) -> None:
        """Roll forward from the commit point (idempotent)."""
        self.at = "."
        self.check_root()
        durable = self.j["durable"]
        with Flush(self.lower if durable else None) as flush:  # before the first rename it makes durable
            self._apply(durable, flush)

    def _apply(self, durable: bool, flush: Flush) -> None:
        dirs = set()
        for rel, kind, trash, ino, want in self.rms:  # deepest first
            self.at = rel
            if os.path.lexists(self.p(trash)):
                continue  # done
            st = lstat_or_none(self.p(rel))
            if st is None or (st.st_ino, kind_of(st.st_mode)) != (ino, kind):
                if st is not None and self.check and not self._ours(rel, st):
                    raise Changed(rel, why(want, st))
                continue  # gone (finish ran, or the user removed it too) or filled by our put or mkdir
            self._remove_entry(rel, trash, want)
            dirs.add(os.path.dirname(self.p(trash)))  # the parent it left is itself removed, or this
        pre = set(self.j["pre"])
        for rel, _ in self.j["mkdirs"]:  # shallowest first
            self.at = rel
            st = lstat_or_none(self.p(rel))
            if rel not in pre and not (st is not None and stat_mod.S_ISDIR(st.st_mode)):
                if st is not None and self.check:
                    raise Changed(rel, why(None, st))
                os.mkdir(self.p(rel), 0o700)
        self.announce()
        for i, put in enumerate(self.puts):
            rel = self.at = put[0]
            if i in self.inplace:
                dirs.add(self._write_in_place(i))  # its data: synced with the renames
            elif not self._landed(i):
                self._put(i)
            dirs.add(os.path.dirname(self.p(rel)))
        for rel, mode in reversed(self.j["mkdirs"]):
            self.at = rel
            if stat_mode(os.lstat(self.p(rel)).st_mode) != mode:  # a replay writes nothing it need not
                os.chmod(self.p(rel), mode)
            dirs.add(os.path.dirname(self.p(rel)))
        if self.check:
            self._unwritten()
        if durable:
            self.at = "."
            flush.sync(dirs)

    def _landed(self, i: int) -> bool:
        if i in self.inplace:
            return i in self.writing or i in self.touched
        rel, stage = self.puts[i][0], self.puts[i][1]
        if not os.path.lexists(self.p(stage)):
            return True
        st = lstat_or_none(self.p(rel))  # swapped in, and killed before the old entry's name went
        put = self.staged[i]
        return st is not None and put is not None and st.st_ino == put[1]

    def _remove_entry(self, rel: str, trash: str, want: Stamp | None) -> None:
        """Move a real entry aside to its trash name; then make sure it was the entry the check saw."""
        t = time.perf_counter()
        self._expect(rel, want)
        os.rename(self.p(rel), self.p(trash))
        _window(t)
        if self.check and want is not None and not same(os.lstat(self.p(trash)), want):
            rename_noreplace(self.p(trash), self.p(rel))  # the user's entry goes back where it was
            raise Changed(rel, why(want, os.lstat(self.p(rel))))

    def _put(self, i: int) -> None:
        """Land put ``i``: never over an entry the user created or changed since the check (an atomic swap
        with the old entry, which is then checked, or a rename that refuses an existing target)."""
        rel, stage = self.puts[i][0], self.puts[i][1]
        src, dst = self.p(stage), self.p(rel)
        want = self._want(i)
        t = time.perf_counter()
        if not self.check:
            os.replace(src, dst)
        elif want is None:
            try:
                rename_noreplace(src, dst)
            except FileExistsError:
                raise Changed(rel, why(None, lstat_or_none(dst))) from None
        else:
            self._expect(rel, want)
            try:
                swapped = exchange(src, dst)
            except FileNotFoundError:
                raise Changed(rel, why(want, None)) from None
            if not swapped:  # no RENAME_EXCHANGE here: the check just above is the last one
                os.replace(src, dst)
            else:
                _window(t)
                if not same(os.lstat(src), want):  # what the swap displaced is not what the check saw
                    exchange(src, dst)
                    raise Changed(rel, why(want, os.lstat(dst)))
                os.unlink(src)  # the old entry: its backup keeps it until finish
                return
        _window(t)

    def _unwritten(self) -> None:
        """The replaced and removed files, now only under our backup and trash names, were not written
        through a descriptor the user held open while apply ran (else undo gives the user's bytes back)."""
        for i, (rel, _, backup, _, _) in enumerate(self.puts):
            want = self._want(i)
            if backup is not None and want is not None and len(want) > 3:
                st = lstat_or_none(self.p(backup))
                if st is not None and st.st_ino == want[1] and not same(st, want):  # a link, not a copy
                    raise Changed(rel, "written in the real tree while the acceptance was being written")
        for rel, _, trash, _, want in self.rms:
            st = lstat_or_none(self.p(trash))
            if st is not None and want is not None and len(want) > 3 and not same(st, want):
                raise Changed(rel, "written in the real tree while the acceptance was being written")

    def undo(self) -> None:
        """Reverse apply after an error (idempotent): puts, then new directories, then removals. An entry
        that is no longer ours as we put it (the user replaced or wrote it since) is left as the user made
        it: no edit of the user's is undone, even if that leaves this one entry new."""
        for rel, _ in self.j["mkdirs"]:  # ours; a read-only mode set by apply would block the unlinks below
            st = lstat_or_none(self.p(rel))
            if st is not None and stat_mod.S_ISDIR(st.st_mode):
                self._tolerate(f"make {self.p(rel)} writable", self.p(rel), os.chmod, self.p(rel), 0o700)
        for i in reversed(range(len(self.puts))):
            rel, _, backup = self.puts[i][:3]
            self.at = rel
            if i in self.inplace:
                self._restore_in_place(i)
                continue
            if not self._landed(i):
                continue
            st = lstat_or_none(self.p(rel))
            if st is None or not self._ours(rel, st):
                continue  # not ours any more: the user's entry stays (rollback drops the backup)
            landed = self.staged[i]
            if self.check and landed is not None and not same(st, landed):
                continue  # the user wrote into what we put: an edit of theirs is never undone
            if backup is not None:
                if os.path.lexists(self.p(backup)):
                    self._tolerate(
                        f"restore {self.p(rel)} from {self.p(backup)}",
                        self.p(backup),
                        os.replace,
                        self.p(backup),
                        self.p(rel),
                    )
                else:
                    self.problems.append(f"could not restore {self.p(rel)}: its backup is gone")
            elif not stat_mod.S_ISDIR(st.st_mode):  # nothing stood there, or a directory (moved aside)
                self._remove(rel)
        pre = set(self.j["pre"])
        for rel, _ in reversed(self.j["mkdirs"]):
            self.at = rel
            st = lstat_or_none(self.p(rel))
            if rel not in pre and st is not None and stat_mod.S_ISDIR(st.st_mode):
                # ours: only a non-directory or nothing stood here
                self._tolerate(f"remove the new directory {self.p(rel)}", self.p(rel), os.rmdir, self.p(rel))
        for rel, _, trash, _, _ in reversed(self.rms):  # shallowest first: parents come back first
            self.at = rel
            if os.path.lexists(self.p(trash)):
                if os.path.lexists(self.p(rel)):
                    self.problems.append(
                        f"could not put {self.p(rel)} back: something new stands there; "
                        f"the old one is at {self.p(trash)}"
                    )
                else:
                    self._tolerate(
                        f"put {self.p(rel)} back from {self.p(trash)}",
                        self.p(trash),
                        os.rename,
                        self.p(trash),
                        self.p(rel),
                    )
        self.rollback()


def _window(t: float) -> None:
    if WINDOWS is not None:
        WINDOWS.append((t, time.perf_counter()))


def _stage(
    src: str,
    dst: str,
    mode: int,
    durable: bool,
    owner: tuple[int, int] | None,
    holes: bool,
    keep: tuple[str, ...],
) -> None:
    copy_file(src, dst, mode=mode, fsync=durable, owner=owner, sparse=holes, keep_xattrs=keep)
