"""Running a command against the merged view, contained: the sandbox primitive for speculative Bash.

The view is made by the chosen backend (kernel overlayfs mounted inside a private namespace by stage one,
the compiled :mod:`overlayfs.stage` or :mod:`overlayfs._nsexec`, or a FUSE mount on the host) and bound at
the project's own path inside the sandbox that :func:`overlayfs.sandbox.policy.bwrap_argv` describes; an
overlay kept by :func:`overlayfs.sandbox.keep_view` shares one view between its commands
(:mod:`.session`). The upper layer lives on a bounded
filesystem (:mod:`overlayfs.bounded`: a write past the bound fails with ENOSPC). A timeout, a cancel, or
the upper layer reaching its bound kill the sandbox's PID namespace, and with it everything the command
started; a command still there :data:`ABORT_AFTER` later (a process asleep in a FUSE request its server
does not answer, which no signal ends) has its view's FUSE connection aborted and the server ended
(:meth:`ViewSession.abort`), so the kill always returns.
A FUSE server that dies under a command makes the run a backend failure, never exit status 0.
Every command of an overlay sees the same ``/tmp`` (and ``$TMPDIR``), the speculation's scratch space
(:meth:`ViewSession.scratch`): stage one attaches it in its private mount namespace, where bubblewrap
binds it; ``/var/tmp`` and ``/run`` are empty and read-only, so that a write there fails as a write
anywhere else outside the project does (EROFS), and the fork's shell can tell it from a live failure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from overlayfs import backends, kernel
from overlayfs import stage as stages
from overlayfs.backends import choose_backend
from overlayfs.bounded import BoundedLayer, LayerUnavailable
from overlayfs.layer import REFUSED_FILE
from overlayfs.mount import Mount, MountError
from overlayfs.sandbox import policy, seccomp
from overlayfs.sandbox.limits import LayerWatch, open_cgroup
from overlayfs.sandbox.policy import SandboxLimits
from overlayfs.sandbox.session import Lease, ViewSession, session_for
from overlayfs.sandbox.stop import ABORT_AFTER, CancelToken, run_process
from overlayfs.state import state_root

BACKEND_FAILED_EXIT = 125
KILLED_EXIT = 137


class SandboxUnavailable(MountError):
    """The full sandbox cannot be built here (no bwrap, no user namespaces, no seccomp, no mount)."""


class SandboxSetupFailed(MountError):
    """The sandbox was built but could not be entered (joining its cgroup, mounting the view, rlimits or
    Landlock failed), so the command never ran: an error, not the command's exit status."""


SETUP_FAILED = "sandbox setup failed: "  # what the stages write on stderr before exiting BACKEND_FAILED_EXIT


class SandboxResult(NamedTuple):
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    backend: str = ""
    limit: str | None = (
        None  # "upper_bytes" / "upper_inodes": the upper layer reached its bound (sandbox killed)
    )
    backend_failed: str | None = None  # why the view died under the command
    enforced: dict[str, str] | None = None  # which mechanism bounds processes, memory, writes
    cancelled: bool = False
    upper_peak: tuple[int, int] | None = None  # the most bytes and inodes the upper layer held during the run


def _check_args(
    ov: kernel.Layers, argv: list[str], timeout: float, cwd: str | os.PathLike[str] | None
) -> tuple[str, str]:
    if not argv:
        raise ValueError("argv is empty: nothing to run")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    target = os.fspath(Path(ov.lower).absolute())
    if target == "/":
        raise ValueError("the project cannot be the root directory")
    workdir = os.fspath(Path(cwd).absolute()) if cwd is not None else target
    if workdir != target and not workdir.startswith(target.rstrip("/") + "/"):
        raise ValueError(f"cwd {workdir!r} is outside the project {target!r}")
    return target, workdir


def run_in_overlay(
    ov: kernel.Layers,
    argv: list[str],
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    network: bool = False,
    backend: str = "auto",
    mount: Mount | None = None,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    cancel: CancelToken | None = None,
    limits: SandboxLimits | None = None,
) -> SandboxResult:
    """Run ``argv`` in the sandbox with the merged view of ``ov`` at ``ov.lower``'s own path; blocks.

    ``cwd`` defaults to the project root and must lie inside it. ``backend`` is "auto", "kernel", "fuse"
    or "fuse-overlayfs"; pass a live ``mount`` (from :func:`overlayfs.mount.open_mount`) to reuse it, or keep
    one for all of ``ov``'s commands with :func:`overlayfs.sandbox.keep_view`.
    ``env`` defaults to the allow-listed part of this process's environment (:func:`policy.sandbox_env`).
    Raises SandboxUnavailable where the sandbox cannot be built.
    """
    target, workdir = _check_args(ov, argv, timeout, cwd)
    limits = limits or SandboxLimits()
    chosen = mount.backend if mount is not None else choose_backend(backend)
    if not backends.get(chosen).mountable:
        raise SandboxUnavailable("no mountable backend here: speculative Bash cannot run")
    why = policy.sandbox_problem()
    if why is not None:
        raise SandboxUnavailable(f"the sandbox cannot be built here: {why}")
    layer = _bounded_layer(ov, limits, mount)
    if mount is not None:
        session, own = ViewSession(ov, chosen, mount=mount, layer_=layer), True
    else:
        session, own = session_for(ov, chosen, layer_=layer)
    token = cancel or CancelToken()
    try:
        try:
            scratch = session.scratch(limits.scratch_bound())
        except LayerUnavailable as e:
            raise SandboxUnavailable(f"the sandbox cannot make its scratch /tmp here: {e}") from e
        lease = session.acquire()
        try:
            out, err, code, timed_out, watch, enforced = _contained(
                ov,
                lease,
                layer,
                scratch,
                argv,
                target=target,
                workdir=workdir,
                limits=limits,
                network=network,
                timeout=timeout,
                env=env,
                stdin=stdin,
                token=token,
                abort=functools.partial(session.abort, lease) if lease.mount is not None else None,
            )
            enforced["view"] = backends.get(chosen).enforces
        finally:
            failed = session.release(lease)
    finally:
        if own:
            session.close()
    setup = next((ln for ln in err.splitlines() if ln.startswith(SETUP_FAILED)), None)
    if code == BACKEND_FAILED_EXIT and setup is not None:
        raise SandboxSetupFailed(setup)
    watch.check()  # the last refusals of a FUSE server are in once the command's requests are answered
    limit = watch.hit
    cancelled = token.cancelled and limit is None and not timed_out
    if lease.aborted:
        err += (
            f"\nsandbox: the command was still there {ABORT_AFTER * 1000:.0f} ms after its kill (a process "
            "asleep in a request its FUSE view did not answer): the view was aborted (the next command gets a "
            "fresh one)\n"
        )
    if failed is not None:
        err += f"\nsandbox: the overlay backend failed under the command: {failed}\n"
        code = BACKEND_FAILED_EXIT if code == 0 else code
    elif limit is not None:
        what = f"{layer.bound.bytes} bytes" if limit == "upper_bytes" else f"{layer.bound.inodes} inodes"
        err += (
            f"\nsandbox: stopped: the speculation's upper layer reached its bound of {what} "
            "(writes past it fail with ENOSPC)\n"
        )
    return SandboxResult(out, err, code, timed_out, chosen, limit, failed, enforced, cancelled, watch.peak)


def _contained(
    ov: kernel.Layers,
    lease: Lease,
    layer: BoundedLayer,
    scratch: BoundedLayer,
    argv: list[str],
    *,
    target: str,
    workdir: str,
    limits: SandboxLimits,
    network: bool,
    timeout: float,
    env: dict[str, str] | None,
    stdin: bytes | None,
    token: CancelToken,
    abort: Callable[[], None] | None,
) -> tuple[str, str, int, bool, LayerWatch, dict[str, str]]:
    """One command in the sandbox over ``lease``'s view: stage one, bubblewrap, the inner stage, the command."""
    stage = stages.stage_program()
    at = scratch_mountpoint()
    view = target if lease.source else lease.view  # kernel: mounted over the project path in stage one
    assert view is not None
    with contextlib.ExitStack() as stack:
        cg = stack.enter_context(open_cgroup(processes=limits.processes, memory_bytes=limits.memory_bytes))
        fd = seccomp.filter_fd()
        stack.callback(os.close, fd)
        abi = policy.landlock_abi()
        mapped = policy.runs_mapped(target)
        if mapped:
            _owned_as_project(ov, target)
        inner = policy.bwrap_argv(
            view=view,
            target=target,
            cwd=workdir,
            argv=list(argv),
            limits=limits,
            network=network,
            seccomp_fd=fd,
            landlock=abi,
            stage=stage,
            scratch=at,
            mapped=mapped,
        )
        if mapped and stage is None:  # the compiled stage one maps the namespace itself (-m)
            inner = policy.userns_argv(inner)
        # Stage one attaches the scratch space at `at` in its private mount namespace (bwrap binds it at
        # /tmp) and, for the kernel backend, mounts the overlay on the layer; both named through inherited
        # descriptors, closed before bwrap.
        fds, close = [fd, scratch.fd], [scratch.fd]
        userns = layer.userns_fd  # a normal user's: mounts are made from within the layer's namespace
        if userns is not None:
            fds.append(userns)
        if lease.source:
            close.append(layer.fd)
            fds.append(layer.fd)
        attach = (scratch.inherited(scratch.tmp), at)
        if stage is not None:
            first = stages.outer_argv(
                stage,
                cgroups=cg.procs,
                overlay=lease.source.get("overlay"),
                target=target,
                attach=attach,
                userns=userns,
                close=close,
                argv=inner,
                map_ids=mapped,
            )
        else:
            spec: dict[str, object] = {
                "cgroups": cg.procs,
                "target": target,
                "source": lease.source,
                "attach": {"from": attach[0], "at": attach[1]},
                "argv": inner,
                "close": close,
            }
            if userns is not None:
                spec["userns"] = userns
            first = kernel.nsexec_argv(spec)
        proc_env = policy.sandbox_env() if env is None else env
        with LayerWatch(layer, Path(ov.metadir) / REFUSED_FILE, token.cancel) as watch:
            out, err, code, timed_out = run_process(
                first,
                timeout=timeout,
                env=proc_env,
                stdin=stdin,
                token=token,
                pass_fds=tuple(fds),
                abort=abort,
            )
    enforced = {
        **cg.enforced,
        "identity": (
            f"root with {', '.join(policy.ROOT_FILE_CAPS)} over every owner's files (the project is "
            f"uid {os.stat(target).st_uid}'s)"
            if mapped
            else "this process's uid, no capability"
        ),
        "writes": f"{layer.describe()}; RLIMIT_FSIZE={limits.upper_bytes}",
        "landlock": f"ABI {abi}",
        "stages": "compiled (stage.c)" if stage else "Python",
    }
    return out, err, code, timed_out, watch, enforced


def _owned_as_project(ov: kernel.Layers, target: str) -> None:
    """The upper layer's root owned as the project's root is: overlayfs shows the upper directory's owner for
    the merged root, so a command run with root's capabilities on uid 1000's project would otherwise see
    the project's root owned by root (``ls -ld .``), where live it is 1000's."""
    st, up = os.stat(target), os.stat(ov.upper)
    if (st.st_uid, st.st_gid) != (up.st_uid, up.st_gid):
        os.chown(ov.upper, st.st_uid, st.st_gid)


def scratch_mountpoint() -> str:
    """An empty directory of ours on the host where stage one attaches a command's scratch space, in its
    private mount namespace only (every command the same directory; none of them changes it on the
    host)."""
    at = state_root() / "sandbox-tmp"
    at.mkdir(mode=0o700, parents=True, exist_ok=True)
    return os.fspath(at)


def _bounded_layer(ov: kernel.Layers, limits: SandboxLimits, mount: Mount | None) -> BoundedLayer:
    """The overlay's bounded layer; an overlay made without one gets one now (``limits``' bound), while its
    upper layer is still empty. Nothing a command writes may land on an unbounded filesystem."""
    layer = getattr(ov, "layer", None)
    if layer is None:
        if mount is not None:
            raise ValueError(
                "the mount given is of an unbounded overlay: make the overlay with "
                "Overlay(lower, bound=...) before mounting it for the sandbox"
            )
        make = getattr(ov, "make_bounded", None)
        if make is None:
            raise ValueError(f"{ov!r} has no bounded upper layer (overlayfs.Overlay(lower, bound=...))")
        try:
            make(limits.layer_bound())
        except LayerUnavailable as e:
            raise SandboxUnavailable(f"the sandbox cannot bound the upper layer here: {e}") from e
        layer = ov.layer  # type: ignore[attr-defined]  # an Overlay's bounded layer: not in Layers
    return layer


def run_sandboxed(
    ov: kernel.Layers,
    command: str,
    *,
    timeout: float,
    backend: str = "auto",
    cwd: str | os.PathLike[str] | None = None,
    cancel: CancelToken | None = None,
    limits: SandboxLimits | None = None,
    mount: Mount | None = None,
    env: dict[str, str] | None = None,
) -> SandboxResult:
    """Run a shell command line as speculative Bash would: ``bash -c command`` inside the sandbox.

    A command killed by the timeout has exit code 124; :meth:`CancelToken.cancel` (from any thread) kills
    the sandbox at once.
    """
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    return run_in_overlay(
        ov,
        [shell, "-c", command],
        timeout=timeout,
        backend=backend,
        cwd=cwd,
        cancel=cancel,
        limits=limits,
        mount=mount,
        env=env,
    )


def wait_cancel_latency(ov: kernel.Layers, *, backend: str, delay: float = 0.3) -> float:
    """Seconds from :meth:`CancelToken.cancel` to the return of a running sandboxed command (benchmarks)."""
    token = CancelToken()
    t: list[float] = []

    def fire() -> None:
        time.sleep(delay)
        t.append(time.perf_counter())
        token.cancel()

    th = threading.Thread(target=fire)
    th.start()
    run_sandboxed(ov, "sleep 30", timeout=60, backend=backend, cancel=token)
    end = time.perf_counter()
    th.join()
    return end - t[0]
