"""Promotion in place: a file the fork changed in place lands in the real file's own inode, so its other hard
links (inside and outside the project), its ACL and its extended attributes stay, as after the live command.

Which files (:func:`lands_in_place`): a regular file replacing a regular file that has something a new inode
would lose (another link, an ACL or an xattr) and that the fork changed in place rather than replaced. The
layers tell the two apart by what a copy-up carries: every backend's copy-up copies the file's xattrs and
ACL into the upper layer (kernel overlayfs and fuse-overlayfs do, and so do our FUSE server and the pure
view), a new file renamed over it (``sed -i``, an editor's save, the Edit and Write tools) has none of them;
and the pure view records a whole-file replacement of a path (``write_bytes``, a rename onto it) in
``meta/replaced``, which is what tells them apart for a file whose only such property is a second link.

How (:mod:`overlayfs.steps`): prepare backs up the old bytes as a copy (a link would change with the file),
holes kept, and stages the new bytes beside it as for any put; after the commit point, before the first of
them is written, one journal line lists them (``writing [i, ...]``, synced when durable); each file is
then checked once more, truncated and the staged bytes copied in (:func:`write_in_place`), and synced with
the apply's durable batch. A replay rewrites every listed file whole (the write is idempotent: a kill
half-way leaves a file that is rewritten); an undo writes the backup's bytes back the same way, into the
files the ``abort`` line says were touched. So a kill at any point recovers to whole-old or whole-new, as
for a replacement.
"""

from __future__ import annotations

import functools
import json
import os
import stat as stat_mod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overlayfs.copyup import ACL, copy_fd, stat_mode, xattrs
from overlayfs.merged import lstat_or_none
from overlayfs.stamps import Changed, Stamp, same, stamp, why

REPLACED_FILE = "replaced"
# The benchmark turns this off to measure promotion without the identity work (every file a replacement,
# no xattrs carried; bench/micro/accept_bench --identity); nothing else may.
IDENTITY = True


def record_replaced(metadir: Path, rel: str, *, by_tool: bool) -> None:
    """Note that the view replaced ``rel`` as a whole (a new inode, as live): it must not land in place.
    ``by_tool``: by ``write_bytes`` (the Edit and Write tools), whose file lands owned as created, as the live
    tools leave it (a rename onto it is what ``sed -i`` does, which keeps the owner)."""
    fd = os.open(metadir / REPLACED_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        line = json.dumps([rel, by_tool], ensure_ascii=False) + "\n"
        os.write(fd, line.encode("utf-8", "surrogateescape"))
    finally:
        os.close(fd)


def load_replaced(metadir: Path) -> dict[str, bool]:
    """The paths the view replaced, each with whether a tool did it last."""
    try:
        data = (metadir / REPLACED_FILE).read_bytes()
    except FileNotFoundError:
        return {}
    out = {}
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        try:
            rel, by_tool = json.loads(line)
        except ValueError:
            continue  # a line torn by a full disk: that path lands as it would without the record
        out[rel] = bool(by_tool)
    return out


def forget_replaced(metadir: Path, drop: set[str] | None) -> None:
    """Drop the records of promoted paths (None: all of them)."""
    path = metadir / REPLACED_FILE
    if not path.exists():
        return
    kept = [] if drop is None else sorted((p, t) for p, t in load_replaced(metadir).items() if p not in drop)
    if not kept:
        path.unlink()
        return
    tmp = metadir / (REPLACED_FILE + ".tmp")
    tmp.write_bytes("".join(json.dumps([p, t], ensure_ascii=False) + "\n" for p, t in kept).encode())
    os.replace(tmp, path)


def kept_acl(real: str, upper: str) -> tuple[str, ...]:
    """The xattrs a replacement of ``real`` by ``upper`` carries over: the ACL, where the fork's file has the
    very ACL the real one has (GNU ``sed -i`` copies it to its new file, and so do editors); never one the
    fork set of its own (docs/security.md, "What acceptance lands": no extended attribute comes from a fork,
    and an ACL would be a way around its rules for write permission)."""
    if not IDENTITY:
        return ()
    try:
        have = os.getxattr(real, ACL, follow_symlinks=False)
        return (ACL,) if os.getxattr(upper, ACL, follow_symlinks=False) == have else ()
    except OSError:
        return ()  # none (ENODATA), or none here


def lands_in_place(real: str, st: os.stat_result, upper: str, replaced: bool) -> bool:
    """Whether the upper file ``upper`` lands in the real file ``real`` (lstat ``st``) itself."""
    if replaced or not IDENTITY or not stat_mod.S_ISREG(st.st_mode):
        return False
    ust = os.lstat(upper)
    if not stat_mod.S_ISREG(ust.st_mode):
        return False
    have = xattrs(real)
    if st.st_nlink < 2 and not have:
        return False  # nothing a new inode would lose (its owner is kept either way: copyup.kept_owner)
    if not os.access(real, os.W_OK):
        return False  # a normal user's read-only file: live, only a replacement could have changed it
    up = xattrs(upper)
    return all(up.get(name) == value for name, value in have.items())  # else the fork made a new file


def write_in_place(
    src: str,
    dst: str,
    *,
    mode: int | None,
    fsync: bool,
    check: Callable[[os.stat_result], None] | None = None,
) -> os.stat_result:
    """Make the existing file ``dst`` hold exactly ``src``'s bytes (holes as in ``src``), in its own inode;
    ``check`` sees ``dst``'s fstat once it is open and before anything is written (it raises to stop);
    ``mode`` is set where it differs. Returns ``dst``'s fstat after the write. Idempotent."""
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dfd = os.open(dst, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(dfd)
            if check is not None:
                check(st)
            # A dense source is written over the old bytes, then the file cut to its size: no blocks freed
            # and allocated again (a truncation to 0 took 1.5 ms per file on ext4). A source with holes is
            # written after a truncation to 0, so that the holes are its own, as live after a truncating
            # write. Either way the write is idempotent: a replay writes the same bytes again.
            sst = os.fstat(sfd)
            dense = sst.st_blocks * 512 >= sst.st_size
            if not dense:
                os.ftruncate(dfd, 0)
            copy_fd(sfd, dfd)
            if dense and st.st_size > sst.st_size:
                os.ftruncate(dfd, sst.st_size)
            if mode is not None and stat_mode(st.st_mode) != mode:
                os.fchmod(dfd, mode)  # on a file with an ACL this sets its mask, as a live chmod does
            if fsync:
                os.fsync(dfd)
            return os.fstat(dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


class InPlace:
    """The in-place half of :class:`overlayfs.steps.Steps` (which sets these attributes from the journal).

    ``writing``: the puts a ``writing [...]`` journal line lists (before the first of them is touched, in
    one line, synced when durable): after a crash each may be half-written, and a replay writes them whole
    again, unchecked. ``touched``: those this process began to write (after its own check of the file);
    ``restore``: what an ``abort`` line says was touched (None: no such line), which a replayed undo
    writes back."""

    j: dict[str, Any]
    puts: list[list[Any]]
    problems: list[str]
    check: bool
    inplace: set[int]
    writing: set[int]
    touched: set[int]
    restore: set[int] | None
    wrote: dict[int, os.stat_result]
    record: Callable[[list[int]], None] | None

    def p(self, rel: str) -> str:
        raise NotImplementedError

    def _want(self, i: int) -> Stamp | None:
        raise NotImplementedError

    def _expect(self, rel: str, want: Stamp | None) -> os.stat_result | None:
        raise NotImplementedError

    def _tolerate(self, what: str, left: str, fn: Callable[..., object], *args: Any) -> None:
        raise NotImplementedError

    def announce(self) -> None:
        """Journal the in-place puts about to be written (one line, before the first write)."""
        todo = sorted(self.inplace - self.writing - set(self.wrote))
        if todo and self.record is not None:
            self.record(todo)

    def abort_record(self) -> dict[str, list[int]]:
        """What the ``abort`` line keeps: the in-place puts that may have been written (an undo replayed
        after a crash writes back those, and leaves the file whose change by the user stopped it alone)."""
        return {"written": sorted(self.touched | self.writing)}

    def _write_in_place(self, i: int) -> str:
        """Write put ``i``'s staged bytes into the real file itself, once its stamp is the one the check saw
        (compared again on the open descriptor, so no rename in between is missed); or again, unchecked, when
        the journal says it was begun (a replay). Returns the path the durable batch must sync."""
        rel, stage, _, mode, _ = self.puts[i]
        if i in self.wrote:
            return self.p(rel)  # this process wrote it already
        want = self._want(i)
        replayed = i in self.writing

        def begin(st: os.stat_result) -> None:
            if not replayed and self.check and want is not None:
                if not (st.st_ino == want[1] and same(st, want)):
                    raise Changed(rel, why(want, st))
            self.touched.add(i)

        if self.check and not replayed:
            self._expect(rel, want)
        try:
            self.wrote[i] = write_in_place(self.p(stage), self.p(rel), mode=mode, fsync=False, check=begin)
        except FileNotFoundError:
            if i in self.touched or not os.path.lexists(self.p(stage)):
                raise
            raise Changed(rel, why(want, None)) from None
        return self.p(rel)

    def _restore_in_place(self, i: int) -> None:
        """Undo put ``i`` written in place: the backup's bytes back into the file, unless the user wrote into
        it after us (then it is theirs, as for a replacement)."""
        rel, _, backup = self.puts[i][:3]
        if i not in self.touched and i not in (self.writing if self.restore is None else self.restore):
            return  # never touched
        st = lstat_or_none(self.p(rel))
        if st is None:
            return  # removed since: nothing of ours stands there
        ours = self.wrote.get(i)
        if ours is not None and not same(st, stamp(ours)):
            return  # the user wrote into what we put: an edit of theirs is never undone
        if not os.path.lexists(self.p(backup)):
            self.problems.append(f"could not restore {self.p(rel)}: its backup is gone")
            return
        mode = stat_mode(os.lstat(self.p(backup)).st_mode)
        self._tolerate(
            f"restore {self.p(rel)} from {self.p(backup)}",
            self.p(backup),
            functools.partial(write_in_place, mode=mode, fsync=bool(self.j["durable"])),
            self.p(backup),
            self.p(rel),
        )

    def complete_in_place(self, i: int) -> None:
        """Write a begun in-place put whole (``recover --abandon`` after the commit point: a file half-way
        between old and new is never kept as it is)."""
        rel, stage, _, mode, _ = self.puts[i]
        if i in self.writing and os.path.lexists(self.p(stage)) and os.path.lexists(self.p(rel)):
            write_in_place(self.p(stage), self.p(rel), mode=mode, fsync=bool(self.j["durable"]))
