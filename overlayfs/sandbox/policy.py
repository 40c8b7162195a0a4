"""What the sandbox is: its limits, whether it can be built here, and the bubblewrap command that builds it.

Every command runs under bubblewrap in new user, PID, IPC, UTS, cgroup and (unless asked) network
namespaces, with no capabilities, no_new_privs, a new session, a read-only root, a fresh minimal /dev
and /proc, the speculation's scratch space on /tmp (a bounded tmpfs kept across its commands, also
``$TMPDIR``), empty read-only tmpfs on /var/tmp and /run, and the merged view bound read-write at the
project's own path. The seccomp filter (:mod:`.seccomp`) is loaded by bwrap just before the
command; Landlock and the per-process rlimits are applied by the inner stage (the compiled
:mod:`overlayfs.stage`, else :mod:`._inner`), the last step before exec.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from overlayfs.bounded import BoundedLayer, LayerBound, LayerUnavailable
from overlayfs.state import state_root

INNER = Path(__file__).with_name("_inner.py")
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/run")  # tmpfs in the sandbox: host sockets and files hidden
SCRATCH_DIR = "/tmp"  # the speculation's scratch space; the other private dirs are empty and read-only
GiB, MiB = 1 << 30, 1 << 20
# The environment a sandboxed command gets is an allow-list: what a shell and a toolchain need, and nothing
# that names a host session or a credential. A deny-list of secret-looking names cannot work (DATABASE_URL,
# REDIS_URL, SENTRY_DSN, MYSQL_PWD look innocent), and what a command sees reaches the model before
# acceptance and can be written into the project. The caller adds what it sets explicitly (the session's
# tool_env, a hook's CLAUDE_PROJECT_DIR), the user what settings name (speculation.env).
PASSED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "PWD")
PASSED_PREFIXES = ("LC_",)  # the locale categories
# Which interpreter and packages a command finds (the same list the bench pins: bench.toolchain.DROPPED_ENV).
TOOLCHAIN_ENV = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "NODE_PATH")


USERNS = Path(__file__).with_name("_userns.py")
# What root's command keeps on another user's project: the capabilities by which live root reads and writes
# any file whatever its owner and mode, and gives a rewritten file its owner back (sed -i's fchown). They act
# only through the user namespace of _userns.py, which maps every id to itself; nothing else (no mount, no
# setuid, no kill outside the PID namespace, no raw I/O).
ROOT_FILE_CAPS = ("CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_CHOWN")


def runs_mapped(project: str) -> bool:
    """Whether a command on ``project`` runs with root's file capabilities (:func:`userns_argv`): this
    process is root and someone else owns the project's directory, where live root's capabilities decide
    what a command may read and write (docs/security.md, "Root on another user's project")."""
    if os.geteuid() != 0:
        return False
    try:
        return os.stat(project).st_uid != 0
    except OSError:
        return False


def userns_argv(argv: list[str]) -> list[str]:
    """``argv`` (bwrap) run by :mod:`._userns`: in a user namespace mapping every uid and gid to itself
    (the Python stages' way; the compiled stage one maps it itself, ``-m``)."""
    return [sys.executable, "-I", "-S", os.fspath(USERNS), *argv]


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Bounds on one sandboxed command (and, for ``upper_bytes`` and ``upper_inodes``, on the whole
    speculation's upper layer).

    ``processes`` and ``memory_bytes`` use a cgroup where this process may make one (root with a writable
    cgroupfs) and per-process rlimits otherwise; root ignores RLIMIT_NPROC, so without a cgroup the
    process bound is reported as not enforced. ``upper_bytes`` and ``upper_inodes`` size the upper
    layer's private tmpfs (:mod:`overlayfs.bounded`) when the overlay was made without a bound of its own.
    ``tmp_bytes`` sizes the speculation's scratch space, its ``/tmp`` (one for all its commands).
    """

    processes: int = 512
    memory_bytes: int = 4 * GiB
    cpu_seconds: int = 600
    upper_bytes: int = LayerBound().bytes
    upper_inodes: int = LayerBound().inodes
    tmp_bytes: int = 512 * MiB
    open_files: int = 4096

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"sandbox limit {name} must be a positive integer, got {value!r}")
        self.layer_bound()  # its own checks (at least 16 inodes)

    def layer_bound(self) -> LayerBound:
        return LayerBound(bytes=self.upper_bytes, inodes=self.upper_inodes)

    def scratch_bound(self) -> LayerBound:
        """The speculation's scratch ``/tmp``: ``tmp_bytes``, and as many inodes as the upper layer."""
        return LayerBound(bytes=self.tmp_bytes, inodes=self.upper_inodes)


@functools.cache
def sandbox_problem() -> str | None:
    """None if the full sandbox (bwrap, user namespaces, seccomp, a bounded upper layer) works here, else a
    sentence why not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        from overlayfs.sandbox.seccomp import SeccompUnavailable, filter_bpf

        filter_bpf()
    except SeccompUnavailable as e:
        return str(e)
    try:
        r = subprocess.run(
            [
                bwrap,
                "--unshare-user",
                "--unshare-pid",
                "--unshare-net",
                "--ro-bind",
                "/",
                "/",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--",
                "true",
            ],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap does not start: {e}"
    if r.returncode != 0:
        return f"bwrap cannot make user namespaces here: {r.stderr.decode(errors='replace').strip()}"
    try:  # nothing a command writes may land on an unbounded filesystem
        BoundedLayer(LayerBound(bytes=1 << 20, inodes=16)).close()
    except LayerUnavailable as e:
        return str(e)
    return None


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (then Landlock is skipped, and said so).
    Probed once per process: the kernel's answer does not change while it runs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    return max(int(v), 0)


def sandbox_env(base: Mapping[str, str] | None = None, *, passed: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``base`` (default: this process's environment) a sandboxed command may see: the
    fixed allow-list (:data:`PASSED_ENV`, ``LC_*``, :data:`TOOLCHAIN_ENV`) and the names in ``passed``."""
    env = os.environ if base is None else base
    names = {*PASSED_ENV, *TOOLCHAIN_ENV, *passed}
    return {k: v for k, v in env.items() if k in names or k.startswith(PASSED_PREFIXES)}


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def keep_paths(stage: str | None = None) -> list[str]:
    """Host paths the sandbox itself needs that a private tmpfs would hide (a venv or checkout in /tmp, the
    compiled ``stage`` program's directory)."""
    wanted = {
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.fspath(INNER.resolve().parent.parent.parent),
        *([os.path.dirname(stage)] if stage else []),
    }
    out = []
    for p in sorted(wanted):
        real = os.path.realpath(p)
        if any(_under(real, d) for d in PRIVATE_DIRS) and os.path.isdir(real):
            out.append(real)
    return out


def bwrap_argv(
    *,
    view: str,
    target: str,
    cwd: str,
    argv: list[str],
    limits: SandboxLimits,
    network: bool,
    seccomp_fd: int,
    landlock: int,
    stage: str | None = None,
    scratch: str | None = None,
    mapped: bool = False,
) -> list[str]:
    """The bubblewrap command line: ``view`` (the merged view, as the host sees it) appears at ``target``,
    ``scratch`` (the speculation's scratch space, as stage one's namespace sees it) at ``/tmp``; without
    it, a fresh tmpfs of ``limits.tmp_bytes``. ``mapped``: bwrap runs in the user namespace of
    :func:`userns_argv` (root on another user's project) and leaves the command :data:`ROOT_FILE_CAPS`.
    Its command is the inner stage: the compiled ``stage`` program (:mod:`overlayfs.stage`), else ``_inner.py``."""
    bwrap = shutil.which("bwrap") or "bwrap"
    uid, gid = os.geteuid(), os.getegid()
    if mapped:  # already in a namespace mapping every id (_userns.py), which also forbids another one
        own = ["--cap-drop", "ALL", *(a for cap in ROOT_FILE_CAPS for a in ("--cap-add", cap))]
    else:
        own = ["--unshare-user", "--uid", str(uid), "--gid", str(gid), "--disable-userns"]
    a = [
        bwrap,
        *own,
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        *([] if network else ["--unshare-net"]),
        "--die-with-parent",
        "--new-session",
        *([] if mapped else ["--cap-drop", "ALL"]),
        "--hostname",
        "speculate",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    for d in PRIVATE_DIRS:
        if not os.path.isdir(d) or os.path.islink(d):
            continue
        if d != SCRATCH_DIR:  # empty and read-only: a write there is a write outside, refused (EROFS)
            a += ["--perms", "0755", "--size", "4096", "--tmpfs", d, "--remount-ro", d]
        elif scratch is not None:
            a += ["--bind", scratch, d, "--setenv", "TMPDIR", d]
        else:
            a += ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", d, "--setenv", "TMPDIR", d]
    state = os.path.realpath(state_root())
    if os.path.isdir(state) and not any(_under(state, d) for d in PRIVATE_DIRS):
        # Other speculations' layers and the promotion journals: none of this command's business.
        a += ["--tmpfs", state]
    for p in keep_paths(stage):
        a += ["--ro-bind", p, p]
    a += ["--bind", view, target, "--chdir", cwd, "--seccomp", str(seccomp_fd)]
    writable = [target, SCRATCH_DIR, "/dev"]
    rlimits = {
        "NPROC": limits.processes,
        "DATA": limits.memory_bytes,
        "CPU": limits.cpu_seconds,
        "FSIZE": limits.upper_bytes,
        "NOFILE": limits.open_files,
        "CORE": 0,
    }
    if stage is not None:
        from overlayfs.stage import inner_argv

        return [
            *a,
            "--",
            *inner_argv(stage, rlimits=rlimits, landlock=landlock, writable=writable, argv=argv),
        ]
    import json

    inner = {"landlock": landlock, "writable": writable, "rlimits": rlimits}
    return [*a, "--", sys.executable, "-I", "-S", os.fspath(INNER), json.dumps(inner), *argv]


def describe(limits: SandboxLimits, enforced: dict[str, str]) -> dict[str, Any]:
    return {"limits": asdict(limits), "enforced": enforced}
