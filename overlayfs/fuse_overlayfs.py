"""fuse-overlayfs (the C reference overlay) on a bounded upper layer: starting it, and the FUSE mount it
serves. Mounting, unmounting and the :class:`overlayfs.mount.Mount` around it are :mod:`overlayfs.backends`' and
:mod:`overlayfs.mount`'s.

fuse-overlayfs needs its layers at real paths, and a bounded layer has none on the host (it is a detached
tmpfs held by a descriptor, :mod:`overlayfs.bounded`): stage one (the compiled stage, or
:mod:`overlayfs._nsexec`) clones it onto a directory in a private mount namespace and execs fuse-overlayfs
there, on a FUSE mount made on the host whose device descriptor it is handed.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from overlayfs import kernel
from overlayfs.errors import MountError
from overlayfs.fuse.device import mount_device
from overlayfs.stage import outer_argv, stage_program


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
            # mount(2) as root, else fusermount3's descriptor hand-off: the same as our own server's
            fd = mount_device(
                root, fsname=f"speculate-fuse-overlayfs.{os.getpid()}", subtype="fuse-overlayfs"
            )
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
