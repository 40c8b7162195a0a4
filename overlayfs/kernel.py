"""Kernel overlayfs backend: probing, host mounts (root only), and keeping promotion safe without a read set.

Kernel overlayfs cannot tell us what a command read, nor record the conflict base of what it copied up
(neither can fuse-overlayfs). So a session on them counts the whole project as read, and before its first
command starts watching the real tree (:func:`snapshot`, an :mod:`overlayfs.treewatch` watch); afterwards
it records (a) a base, taken from the real tree, for every path the session changed in the upper layer,
and (b) one read record naming the watch: promotion then conflicts if anything in the project changed
during the speculation. Conservative, and its cost grows with what changed, not with the project: the
bases are taken now because the watch vouches that the real tree is still what the commands saw (else the
watch's change is a conflict anyway). Where no watch can be made, the snapshot of old is used: an ``lstat``
walk of the whole tree, every regular file of it recorded as read (see docs/overlay.md, "Cost").

The mount stays without ``redirect_dir``, so renaming a directory that has lower content answers EXDEV
(``mv`` and ``shutil.move`` then copy, as across file systems; the FUSE view answers the same way). With
``redirect_dir=on`` the kernel would record the move as a ``trusted.overlay.redirect`` xattr that this
package's reader of the upper layer (changes, promotion) does not follow, and a mount in a user namespace
(``userxattr``) cannot enable it at all. A speculative command that fails on such a rename stops at a
boundary instead (speculate.speculation.sandbox_shell).
"""

from __future__ import annotations

import bisect
import errno
import functools
import os
import stat as stat_mod
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from overlayfs import layer, treewatch
from overlayfs.merged import lstat_or_none
from overlayfs.walk import Walk, at

if TYPE_CHECKING:
    from overlayfs.bounded import BoundedLayer

NSEXEC = Path(__file__).with_name("_nsexec.py")
WATCH_PREFIX = "//watch/"  # the path of a read record naming a watch: no project path starts so


class Watched:
    """The lower tree as a watch of its changes (:mod:`overlayfs.treewatch`) instead of a snapshot."""

    def __init__(self, watch: treewatch.TreeWatch) -> None:
        self.watch = watch
        watch.hold(self)

    def read_record(self) -> layer.Identity:
        """The read record that stands for "every file of the project", checked through the watch."""
        w = self.watch
        return layer.Identity(f"{WATCH_PREFIX}{w.token}", True, "watch", 0, 0, 0, w.token)


Snapshot = dict[str, layer.Identity] | Watched


class Layers(Protocol):
    """What a mounted backend needs of an overlay (``overlayfs.Overlay`` has these)."""

    lower: Path
    upper: Path
    workdir: Path
    metadir: Path


def nsexec_argv(spec: dict[str, Any]) -> list[str]:
    import json

    return [sys.executable, "-I", "-S", os.fspath(NSEXEC), json.dumps(spec)]


def overlay_source(ov: Layers, layer: BoundedLayer | None = None) -> dict[str, Any]:
    """Stage one's mount of ``ov``; with its bounded ``layer``, the paths stage one reaches it by."""
    upper, work = os.fspath(ov.upper), os.fspath(ov.workdir)
    if layer is not None:
        upper, work = layer.inherited(upper), layer.inherited(work)
    return {"overlay": {"lowerdir": os.fspath(ov.lower), "upperdir": upper, "workdir": work}}


@functools.cache
def kernel_available() -> str | None:
    """None if kernel overlayfs mounts work in a private namespace here, else why not."""
    with tempfile.TemporaryDirectory(prefix="speculate-probe-") as d:
        for sub in ("l", "u", "w", "m"):
            os.mkdir(os.path.join(d, sub))
        Path(d, "l", "f").write_text("x")
        spec = {
            "target": f"{d}/m",
            "source": {"overlay": {"lowerdir": f"{d}/l", "upperdir": f"{d}/u", "workdir": f"{d}/w"}},
            "argv": ["cat", f"{d}/m/f"],
            "cwd": "/",
            "isolate": False,
        }
        try:
            r = subprocess.run(nsexec_argv(spec), capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"probe failed: {e}"
        if r.returncode != 0 or r.stdout != b"x":
            return f"overlay mount in a private namespace failed: {r.stderr.decode(errors='replace').strip()}"
    return None


def mount_host(ov: Layers, mountpoint: Path, *, owner: int) -> None:
    """Mount kernel overlayfs in this process's mount namespace (needs CAP_SYS_ADMIN there: root)."""
    from overlayfs._nsexec import _mount

    Path(ov.workdir).mkdir(parents=True, exist_ok=True)
    opts = f"lowerdir={ov.lower},upperdir={ov.upper},workdir={ov.workdir}"
    _mount(f"speculate-overlay.{owner}", os.fspath(mountpoint), "overlay", 0, opts)


def snapshot(lower: Path) -> Snapshot:
    """What a session on a backend that records no reads compares the real tree with later: a watch of its
    changes from now on where one can be made here (:func:`overlayfs.treewatch.start`), else the metadata
    (no hashes) of every entry of the lower tree, by relative path."""
    watch = treewatch.start(lower)
    if watch is not None:
        return Watched(watch)
    return full_snapshot(lower)


def full_snapshot(lower: Path) -> dict[str, layer.Identity]:
    """Metadata (no hashes) of every entry of the lower tree, by relative path."""
    out: dict[str, layer.Identity] = {}
    for rel, _, entries in Walk(lower).dirs():  # by descriptor: a tree deeper than PATH_MAX does not crash it
        for e in entries:
            r = f"{rel}/{e.name}" if rel else e.name
            out[r] = _identity(r, e.stat(follow_symlinks=False))
    return out


def _identity(rel: str, st: os.stat_result) -> layer.Identity:
    m = st.st_mode
    kind = (
        "dir"
        if stat_mod.S_ISDIR(m)
        else "file"
        if stat_mod.S_ISREG(m)
        else "symlink"
        if stat_mod.S_ISLNK(m)
        else "other"
    )
    return layer.Identity(rel, True, kind, st.st_size, st.st_mtime_ns, st.st_ino, None)


def record_session(ov: Layers, before: Snapshot, *, reads: bool = True) -> None:
    """After a kernel-overlay session: bases for what it changed, and the whole project as the read set
    (unless ``reads`` is False: an earlier call of the same session recorded it): one record naming the
    watch, or with a snapshot every regular file of it."""
    if isinstance(before, Watched):
        _record_watched(ov, before, reads=reads)
        return
    metadir = Path(ov.metadir)
    based = set(layer.load_identities(metadir, layer.BASES_FILE))
    changed: list[str] = []
    # By descriptor: a command may leave a tree deeper than PATH_MAX (what lies past it is a boundary that
    # overlayfs.changes names; its bases are not needed, as it can never be promoted).
    for rel, fd, entries in Walk(ov.upper).dirs():
        for e in entries:
            r = (
                f"{rel}/{e.name}" if rel else e.name
            )  # an entry or its whiteout: a change of that path either way
            # A merged directory copied up for its children is not itself a change.
            if (
                e.is_dir(follow_symlinks=False)
                and r in before
                and before[r].kind == "dir"
                and not layer.is_opaque(at(fd, e.name))
            ):
                continue
            changed.append(r)
    # A whiteout or an opaque directory hides the lower subtree beneath it: the deleted descendants are
    # changes too, and need their bases (promotion refuses a change with no base).
    keys = sorted(before)
    for r in list(changed):
        i = bisect.bisect_left(keys, r + "/")
        while i < len(keys) and keys[i].startswith(r + "/"):
            changed.append(keys[i])
            i += 1
    for r in dict.fromkeys(changed):
        if r not in based:
            layer.record_base(metadir, before.get(r, layer.Identity(r, False)))
    if not reads:
        return
    read = set(layer.load_identities(metadir, layer.READS_FILE))
    lines = [ident for r, ident in before.items() if ident.kind == "file" and r not in read]
    if lines:
        with open(metadir / layer.READS_FILE, "ab") as f:  # one append, not one per file
            f.write(b"".join(layer.identity_line(i) for i in lines))


_UNNAMEABLE = object()


def _lower_stat(path: str) -> Any:
    """``lstat`` of a real-tree path, None where absent, :data:`_UNNAMEABLE` where the path is deeper than
    the host can name (a relative mkdir/cd past PATH_MAX in the sandbox). No base is recorded for such a
    path, and none is needed: reading the changes refuses it by name (HostPathTooLong), so the speculation
    is a boundary and never promoted."""
    try:
        return lstat_or_none(path)
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise
        return _UNNAMEABLE


def _record_watched(ov: Layers, w: Watched, *, reads: bool) -> None:
    """:func:`record_session` with a watch: the bases come from the real tree now, which the watch vouches
    is what the commands saw (a change there since is the watch's conflict). Costs what changed: the upper
    layer's entries, and the real subtrees they delete or replace."""
    metadir, lower = Path(ov.metadir), os.fspath(ov.lower)
    based = set(layer.load_identities(metadir, layer.BASES_FILE))
    changed: list[str] = []
    for rel, fd, entries in Walk(ov.upper).dirs():
        for e in entries:
            r = f"{rel}/{e.name}" if rel else e.name
            if e.is_dir(follow_symlinks=False) and not layer.is_opaque(at(fd, e.name)):
                st = _lower_stat(f"{lower}/{r}")
                if isinstance(st, os.stat_result) and stat_mod.S_ISDIR(st.st_mode):
                    continue  # a merged directory copied up for its children is not itself a change
            changed.append(r)
    lines: list[bytes] = []
    for r in changed:
        if (st := _lower_stat(f"{lower}/{r}")) is _UNNAMEABLE:
            continue
        if r not in based:
            lines.append(
                layer.identity_line(_identity(r, st) if st is not None else layer.Identity(r, False))
            )
            based.add(r)
        if st is not None and stat_mod.S_ISDIR(st.st_mode):
            # Replaced or deleted with everything beneath it (``rm -rf``): each entry needs its base.
            for sub, _, below in Walk(f"{lower}/{r}").dirs():
                for e in below:
                    d = f"{r}/{sub}/{e.name}" if sub else f"{r}/{e.name}"
                    if d not in based:
                        lines.append(layer.identity_line(_identity(d, e.stat(follow_symlinks=False))))
                        based.add(d)
    if lines:
        with open(metadir / layer.BASES_FILE, "ab") as f:  # one append, not one per path
            f.write(b"".join(lines))
    if reads:
        with open(metadir / layer.READS_FILE, "ab") as f:
            f.write(layer.identity_line(w.read_record()))
        w.watch.attach(metadir / layer.READS_FILE)
