"""The mounted view one overlay's sandboxed commands share: mounted at the first command, closed with the
overlay (:meth:`overlayfs.Overlay.discard`, or before a promotion).

Starting a FUSE server costs 150–250 ms, so a speculation's commands share one mount instead of making one
each. The pure view (the fork's file tools) writes the same upper layer between commands, behind the
mount's back; what the mount caches must then be dropped before the next command:

- ``fuse`` (our server): at the view's first write after a command the upper layer's entries are listed
  with their stat (:func:`manifest`); before the next command they are listed again and every path that
  was added, removed or changed is sent to the server, which re-resolves those paths, drops the kernel's
  dentries for them (positive and negative) and the attributes of their directories
  (:meth:`overlayfs.fuse.ops.OverlayOps.external_changes`), then answers. A server that cannot answer is
  replaced by a fresh mount.
- ``fuse-overlayfs`` cannot be told: a write by the view makes its mount stale, and the next command gets a
  fresh one. After each command its own markers (:func:`overlayfs.layer.adopt_fuse_overlayfs`) must be
  rewritten before anyone reads the layer, which needs its mount closed: a command that made an opaque
  directory also ends the mount.
- ``kernel`` overlayfs is mounted per command inside stage one's private namespace (a mount(2) of well
  under a millisecond): a mount kept across commands could not be told of the view's writes either.

Kernel overlayfs and fuse-overlayfs cannot say what a command read or changed: at the first command the
real tree is put under a watch (:mod:`overlayfs.treewatch`: fanotify as root, inotify otherwise; a snapshot
of its metadata only where neither can be made), and after each command the bases of what it changed are
recorded from the real tree, which the watch vouches for; any change the watch sees is a conflict (see
:mod:`overlayfs.kernel`, and docs/overlay.md, "Cost").

Commands of one overlay may run at once (read-only calls run in parallel): they share the mount; the
bookkeeping before and after each is under one lock.

The session also holds the speculation's scratch space (:meth:`ViewSession.scratch`): the ``/tmp`` every
command of the overlay sees, a bounded tmpfs of its own (``SandboxLimits.tmp_bytes``) made at the first
command, kept across the commands and freed when the session closes (with the overlay); like the upper
layer it is mounted nowhere on the host, so a crash leaves nothing of it behind.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overlayfs import backends, kernel
from overlayfs.backends import MOUNTABLE, choose_backend
from overlayfs.bounded import BoundedLayer, LayerBound
from overlayfs.mount import Mount, MountError, open_mount
from overlayfs.sandbox.stop import abort_mount, backend_failure
from overlayfs.walk import Walk

log = logging.getLogger("overlayfs.sandbox")
Manifest = dict[str, tuple[int, int, int, int, int]]
# Past this many changed paths a fresh mount is cheaper than telling the server about each.
MAX_INVALIDATIONS = 2000


def manifest(upper: str) -> Manifest:
    """Every entry of the upper layer by relative path: (mode, inode, size, mtime_ns, ctime_ns). Any change
    the view makes moves one of them (a replaced file is a new inode; a marker xattr moves ctime, which the
    kernel takes fine-grained once it has been read, as here). Walked by descriptor: a tree deeper than
    PATH_MAX is listed as far as a path can name it (the view cannot write beneath that either)."""
    out: Manifest = {}
    try:
        for rel, _, entries in Walk(upper).dirs():
            for e in entries:
                st = e.stat(follow_symlinks=False)
                out[f"{rel}/{e.name}" if rel else e.name] = (
                    st.st_mode,
                    st.st_ino,
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_ctime_ns,
                )
    except FileNotFoundError:  # no upper layer (yet)
        pass
    return out


def changed_paths(before: Manifest, after: Manifest) -> list[str]:
    return sorted(r for r in before.keys() | after.keys() if before.get(r) != after.get(r))


@dataclass
class Lease:
    """What one command gets: stage one's mount of a kernel overlay (``source``) or the host path of a
    mounted view (``view``), and the mount it holds (released by :meth:`ViewSession.release`)."""

    source: dict[str, Any]
    view: str | None
    mount: Mount | None
    aborted: bool = (
        False  # the command outlived its kill and its mount was aborted (:meth:`ViewSession.abort`)
    )


class ViewSession:
    """The view of ``ov`` (an :class:`overlayfs.Overlay` or any :class:`overlayfs.kernel.Layers`) that its
    commands share on ``backend``; a ``mount`` given by the caller is used as it is and never closed."""

    def __init__(
        self,
        ov: kernel.Layers,
        backend: str,
        *,
        mount: Mount | None = None,
        layer_: Any = None,
        scratch_bound: LayerBound | None = None,
    ) -> None:
        self.ov, self.backend, self.layer = ov, backend, layer_
        self._kind = backends.get(backend)  # what the backend can do itself, and what it leaves to us
        self._given = mount
        self._mount: Mount | None = mount
        self._users = 0
        self._stale = False  # the mount no longer shows the upper layer: replace it when no command uses it
        self._baseline: Manifest | None = None  # the upper layer as our FUSE server last left it
        self._snapshot: kernel.Snapshot | None = None
        self._reads_recorded = False
        self._lock = threading.Lock()
        self._handoff_lock = threading.Lock()  # orders close() against the end of prepare()
        self._preparing = False
        self._scratch: BoundedLayer | None = None
        self._scratch_bound = scratch_bound  # made by prepare() too: a normal user's costs a helper's start
        self.closed = False

    # -- around each command -------------------------------------------------------------------------
    def prepare(self) -> None:
        """Make the view now, in a thread, so that the first command does not wait for it: a fork's first
        command comes after at least one model request (over a second), a FUSE server starts in 0.15-0.2 s.
        Only for an overlay already on its bounded layer (a mount made before ``make_bounded`` would show
        the wrong layer). :meth:`acquire` and :meth:`close` wait for it (they take the same lock); a failure
        is left for the first command to meet and report."""
        if getattr(self.ov, "layer", None) is None or self._given is not None:
            return
        with self._handoff_lock:
            self._preparing = True
        threading.Thread(target=self._prepare, name="sandbox-view-prepare", daemon=True).start()

    def _prepare(self) -> None:
        with self._lock:
            try:
                if not self.closed:
                    if self._scratch_bound is not None and self._scratch is None:
                        self._make_scratch(self._scratch_bound)
                    if self._kind.snapshots_lower and self._snapshot is None:
                        self._snapshot = kernel.snapshot(Path(self.ov.lower))
                    if not self._kind.mounted_per_command and self._mount is None:
                        self._current_mount()
            except OSError as e:
                log.info(
                    "preparing the %s view of %s failed (%s); the first command retries",
                    self.backend,
                    self.ov.lower,
                    e,
                )
            finally:
                with self._handoff_lock:
                    self._preparing = False
                    closed = self.closed
                if closed:  # closed while this ran: close() left the unmount to it
                    self._close_mount()

    def acquire(self) -> Lease:
        """Before a command: the view it runs in (mounted now if needed). Raises MountError."""
        with self._lock:
            if self.closed:
                raise MountError(f"the sandbox view of {self.ov.lower} was closed")
            if self._kind.snapshots_lower and self._given is None and self._snapshot is None:
                self._snapshot = kernel.snapshot(Path(self.ov.lower))
            if self._kind.mounted_per_command and self._given is None:
                Path(self.ov.workdir).mkdir(parents=True, exist_ok=True)
                self._users += 1
                return Lease(kernel.overlay_source(self.ov, self.layer), None, None)
            m = self._current_mount()
            self._users += 1
            return Lease({}, os.fspath(m.root), m)

    def scratch(self, bound: LayerBound) -> BoundedLayer:
        """The speculation's scratch space: a bounded tmpfs whose ``tmp/`` (mode 1777) every command of the
        overlay sees as ``/tmp``; made at the first call (``bound``), the same one after, freed by
        :meth:`close`. Raises MountError once closed, LayerUnavailable where no tmpfs can be made."""
        with self._lock:
            if self.closed:
                raise MountError(f"the sandbox view of {self.ov.lower} was closed")
            return self._scratch or self._make_scratch(bound)

    def _make_scratch(self, bound: LayerBound) -> BoundedLayer:
        """Under the session's lock."""
        made = BoundedLayer(bound)
        try:
            os.chmod(made.tmp, 0o1777)  # as a /tmp is: anyone may create, only owners remove
        except OSError:
            made.close()
            raise
        with self._handoff_lock:  # close() frees what it finds, and takes this lock to look
            if self.closed:
                made.close()
                raise MountError(f"the sandbox view of {self.ov.lower} was closed")
            self._scratch = made
        return made

    def release(self, lease: Lease) -> str | None:
        """After a command: why its view failed under it (None: it did not), and the bookkeeping the backend
        cannot do itself. A failed mount is closed; the next command gets a fresh one."""
        with self._lock:
            self._users -= 1
            forget = getattr(self.ov, "upper_changed", None)
            if forget is not None:  # the pure view's cached lookups: the command may have written anything
                forget()
            failed = backend_failure(lease.mount) if lease.mount is not None and not lease.aborted else None
            if lease.mount is not None and self._given is None and lease.mount is self._mount:
                if failed is not None or lease.aborted:
                    self._stale = True
                elif self._kind.stale_after_command(os.fspath(self.ov.upper)):
                    self._stale = True
            if self._stale and self._users == 0 and self._mount is not None:
                self._close_mount()  # records what the command changed, once fuse-overlayfs's markers are ours
            elif self._snapshot is not None:
                self._record()
            return failed

    def before_view_write(self) -> None:
        """The pure view is about to write the upper layer (called by :class:`overlayfs.Overlay`)."""
        with self._lock:
            if self._mount is None or self._given is not None:
                return
            if self._kind.told_of_writes:
                if self._baseline is None and not self._stale:
                    self._baseline = manifest(os.fspath(self.ov.upper))
            else:
                self._stale = True

    def abort(self, lease: Lease) -> None:
        """The command over ``lease`` is still there after its kill: some process of it sleeps
        uninterruptibly in a request the mount's server is not answering (a layer file it blocks on, a
        wedged lower filesystem). Abort the mount's FUSE connection and end its server: every waiting
        request then fails with ENOTCONN and the killed processes go. The next command mounts afresh; a
        command sharing the mount meanwhile fails as a backend failure. Any thread, without the session's
        lock (held across a mount, which this must not wait for)."""
        if lease.mount is None:
            return
        lease.aborted = True
        log.warning("a command over %s outlived its kill: aborting its %s mount", self.ov.lower, self.backend)
        abort_mount(lease.mount)

    def record_so_far(self) -> None:
        """Record now the bases of what a command still running has changed so far, where we record them
        from the snapshot (else only its end does): an acceptance checks for conflicts while the fork's last
        command may still be writing, and a change with no base counts as a conflict. The bases are the
        snapshot's, taken before the first command, so recording them early changes none of them. Not while
        fuse-overlayfs's own markers are in the upper layer: those are read only once it has closed."""
        with self._lock:
            if (
                self._snapshot is not None
                and self._users > 0
                and self._given is None
                and not self._kind.stale_after_command(os.fspath(self.ov.upper))
            ):
                self._record()

    def outdated(self) -> None:
        """The layers changed under the view (a promotion): the next command gets a fresh mount and a fresh
        snapshot."""
        with self._lock:
            self._stale, self._baseline = True, None
            self._snapshot, self._reads_recorded = None, False

    def close(self) -> None:
        """Unmount (the overlay is discarded); idempotent. While :meth:`prepare`'s thread is still making
        the view this returns at once and leaves the unmount to it (an abort must not wait for a mount)."""
        with self._handoff_lock:
            if self.closed:
                return
            self.closed = True
            scratch, self._scratch = self._scratch, None
            if scratch is not None:  # a command still running keeps it mounted until it ends
                scratch.close()
            if self._preparing:
                return
        with self._lock:
            self._close_mount()

    # -- helpers -------------------------------------------------------------------------------------
    def _current_mount(self) -> Mount:
        m = self._mount
        if m is not None and self._given is None:
            if m._proc is not None and m._proc.poll() is not None:  # died between commands: a fresh one
                log.warning(
                    "the %s server of %s exited (%s) between commands; mounting afresh",
                    self.backend,
                    self.ov.lower,
                    m._proc.returncode,
                )
                self._stale = True
            if self._stale and self._users == 0:
                self._close_mount()
                m = None
            elif self._baseline is not None:
                self._tell_server(m)
        if m is None:
            # Bases are recorded after each command here, from the session's snapshot.
            m = self._mount = open_mount(self.ov, self.backend, snapshot=False)
            self._stale, self._baseline = False, None
        return m

    def _tell_server(self, m: Mount) -> None:
        assert self._baseline is not None
        paths = changed_paths(self._baseline, manifest(os.fspath(self.ov.upper)))
        self._baseline = None
        if not paths:
            return
        try:
            if len(paths) > MAX_INVALIDATIONS:
                raise MountError(f"{len(paths)} paths changed")
            m.invalidate(paths)
        except OSError as e:  # the server cannot be trusted to show the layer: start a fresh one
            log.warning(
                "the FUSE server of %s was not told of the view's writes (%s); mounting afresh",
                self.ov.lower,
                e,
            )
            if self._users == 0:
                self._close_mount()
            else:
                self._stale = True

    def _close_mount(self) -> None:
        m, self._mount = self._mount, None
        self._baseline = None
        if m is not None and self._given is None:
            try:
                m.close()  # fuse-overlayfs: its markers are adopted here
            finally:
                if self._snapshot is not None:
                    self._record()

    def _record(self) -> None:
        assert self._snapshot is not None
        kernel.record_session(self.ov, self._snapshot, reads=not self._reads_recorded)
        self._reads_recorded = True


def keep_view(ov: Any, backend: str, *, scratch_bound: LayerBound | None = None) -> ViewSession:
    """Let the sandboxed commands of ``ov`` (an :class:`overlayfs.Overlay`) share one mounted view on
    ``backend`` until ``ov.discard()`` closes it (a promotion makes the next command mount afresh): a
    fork's shell does this, and the view is made at once in the background (:meth:`ViewSession.prepare`).
    Without it each command mounts afresh. ``scratch_bound``: make the speculation's scratch space in
    the background too (:meth:`ViewSession.scratch`; else at the first command). ``"auto"`` is the backend that
    :func:`overlayfs.sandbox.run_in_overlay` picks; MountError where none can be mounted here."""
    if backend == "auto":
        backend = choose_backend(backend)
        if backend not in MOUNTABLE:
            raise MountError("no mountable backend here: a kept view needs one")
    if backend not in MOUNTABLE:
        raise ValueError(f"a kept view needs a mountable backend ({', '.join(MOUNTABLE)}), not {backend!r}")
    held = ov.sandbox
    if held is not None and held.backend == backend and not held.closed:
        return held
    ov.close_sandbox()
    ov.sandbox = held = ViewSession(ov, backend, scratch_bound=scratch_bound)
    held.prepare()
    return held


def session_for(ov: kernel.Layers, backend: str, *, layer_: Any) -> tuple[ViewSession, bool]:
    """The view session ``ov`` keeps for its commands (:func:`keep_view`), else one for this command only,
    and whether the caller owns it (closes it after the command)."""
    held = getattr(ov, "sandbox", None)
    if held is None or held.closed:
        return ViewSession(ov, backend, layer_=layer_), True
    if held.backend != backend:
        held = keep_view(ov, backend)
    held.layer = layer_
    return held, False
