"""fuse-overlayfs (the C reference overlay) on a bounded upper layer: starting it, and the FUSE mount it
serves. Mounting, unmounting and the :class:`overlayfs.mount.Mount` around it are :mod:`overlayfs.backends`' and
:mod:`overlayfs.mount`'s.

fuse-overlayfs needs its layers at real paths, and a bounded layer has none on the host (it is a detached
tmpfs held by a descriptor, :mod:`overlayfs.bounded`): stage one (the compiled stage, or
:mod:`overlayfs._nsexec`) clones it onto a directory in a private mount namespace and execs fuse-overlayfs
there, on a FUSE mount made on the host whose device descriptor it is handed.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
from pathlib import Path

from overlayfs import kernel
from overlayfs.errors import MountError
from overlayfs.stage import outer_argv, stage_program

_MS_NOSUID, _MS_NODEV = 2, 4
_libc = ctypes.CDLL(None, use_errno=True)


def start_on_layer(ov: kernel.Layers, root: Path) -> subprocess.Popen[bytes]:
    """Start fuse-overlayfs serving ``ov`` (bounded) at ``root``; returns its process once it answers. The
    namespace exists before the mount, so it holds no copy of the mount that would outlive the unmount.
    Raises MountError."""
    layer = ov.layer  # type: ignore[attr-defined]  # an Overlay's bounded layer: not in Layers
    at = Path(ov.metadir) / "layer"
    at.mkdir(exist_ok=True)
    opts = f"lowerdir={ov.lower},upperdir={at}/upper,workdir={at}/work/fuse-overlayfs"
    argv = ["fuse-overlayfs", "-f", "-o", opts, "/dev/fd/{fd}"]
    ours, theirs = socket.socketpair()
    fds = [theirs.fileno(), layer.fd]
    if layer.userns_fd is not None:
        fds.append(layer.userns_fd)
    program = stage_program()
    if (
        program is not None
    ):  # the compiled stage: no interpreter start (a remount follows each file-tool write)
        first = outer_argv(
            program,
            attach=(layer.inherited(layer.path), os.fspath(at)),
            handoff=theirs.fileno(),
            userns=layer.userns_fd,
            close=[layer.fd],
            argv=argv,
        )
    else:
        spec: dict[str, object] = {
            "attach": {"from": layer.inherited(layer.path), "at": os.fspath(at)},
            "argv": argv,
            "close": [layer.fd],
            "handoff": theirs.fileno(),
        }
        if layer.userns_fd is not None:
            spec["userns"] = layer.userns_fd
        first = kernel.nsexec_argv(spec)
    logf = open(Path(ov.metadir) / "fuse-server.log", "ab")
    try:
        proc = subprocess.Popen(
            first,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=logf,
            pass_fds=tuple(fds),
            start_new_session=True,
            cwd="/",
        )
    finally:
        logf.close()
        theirs.close()
    with ours:
        try:
            ours.settimeout(30)
            if ours.recv(1) != b"r":
                raise OSError(0, "it exited before it was ready")
            fd = _fuse_device(root)
            try:
                socket.send_fds(ours, [b"f"], [fd])
            finally:
                os.close(fd)
            os.stat(root)  # answered once fuse-overlayfs serves the mount
        except OSError as e:
            proc.kill()
            proc.wait()
            tail = (
                (Path(ov.metadir) / "fuse-server.log").read_bytes()[-2000:].decode(errors="replace").strip()
            )
            raise MountError(
                f"fuse-overlayfs did not come up on the bounded layer at {root}: {e}; {tail}"
            ) from None
    return proc


def _fuse_device(root: Path) -> int:
    """Mount an empty FUSE filesystem at ``root`` and return its /dev/fuse descriptor: root mounts it
    itself, anyone else through fusermount3 (libfuse's protocol: it sends the descriptor over the socket
    named by ``_FUSE_COMMFD``)."""
    if os.geteuid() == 0:  # what fusermount3 would do, without its exec
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        data = f"fd={fd},rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other"
        try:
            _sys_mount(
                f"speculate-fuse-overlayfs.{os.getpid()}",
                root,
                "fuse.fuse-overlayfs",
                _MS_NOSUID | _MS_NODEV,
                data,
            )
        except OSError as e:
            os.close(fd)
            raise OSError(e.errno, f"mounting FUSE at {root}: {e.strerror}") from None
        return fd
    opts = (
        "rw,nosuid,nodev,default_permissions,subtype=fuse-overlayfs,"
        f"fsname=speculate-fuse-overlayfs.{os.getpid()}"
    )
    ours, theirs = socket.socketpair()
    with ours, theirs:
        r = subprocess.run(
            ["fusermount3", "-o", opts, "--", os.fspath(root)],
            capture_output=True,
            timeout=30,
            env={**os.environ, "_FUSE_COMMFD": str(theirs.fileno())},
            pass_fds=(theirs.fileno(),),
        )
        if r.returncode != 0:
            raise OSError(0, f"fusermount3 failed: {r.stderr.decode(errors='replace').strip()}")
        theirs.close()
        ours.settimeout(10)
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    if not fds:
        raise OSError(0, "fusermount3 handed over no FUSE descriptor")
    return fds[0]


def _sys_mount(source: str, target: Path, fstype: str, flags: int, data: str) -> None:
    if _libc.mount(
        source.encode(), os.fsencode(target), fstype.encode(), ctypes.c_ulong(flags), data.encode()
    ):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), os.fspath(target))
