"""The host-side bait the escape attempts go after (:class:`Bait`), and :func:`digest`, which tells
whether a host location changed."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from overlayfs.state import state_root
from tests.sandbox.escapes.sockets import HostSockets


def digest(path: str) -> str:
    """Names, types, modes, sizes and contents under ``path`` ("absent" when nothing is there)."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return "absent"
    h = hashlib.sha256()
    items = [p] if not p.is_dir() or p.is_symlink() else [p, *sorted(p.rglob("*"))]
    for q in items:
        try:
            st = q.lstat()
            h.update(f"{q}\0{st.st_mode}\0{st.st_size}\0".encode())
            if q.is_file() and not q.is_symlink():
                h.update(q.read_bytes())
        except OSError as e:
            h.update(f"{q}\0{e.errno}".encode())
    return h.hexdigest()


class Bait:
    """Host-side things an attempt may go after, owned by the user running the suite."""

    def __init__(self, base: Path) -> None:
        self.tag = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.secret = f"speculate-secret-{secrets.token_hex(8)}"
        self.api_key = f"sk-speculate-test-{secrets.token_hex(8)}"  # scrubbed from the sandbox's environment
        self.base = base
        self.home = base / "home"
        self.home.mkdir()
        (self.home / "canary.txt").write_text("canary\n")
        (self.home / ".bashrc").write_text("# the user's own\n")
        self.host_tmp = Path(tempfile.mkdtemp(prefix="speculate-escape-host-", dir="/tmp"))  # the host's /tmp
        self.canary_cwd = base / "canary-cwd"
        self.canary_cwd.mkdir()
        self.hits: list[str] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Bait:
        env = {"PATH": "/usr/bin:/bin", "SPECULATE_CANARY": self.secret}
        self.canary = subprocess.Popen(
            ["bash", "-c", f"exec -a speculate-canary-{self.tag} sleep 600"], cwd=self.canary_cwd, env=env
        )
        self._stack.callback(self._stop_canary)
        self.cgroup_kill = self._canary_cgroup()
        self.sock = os.fspath(self.home / "agent.sock")
        self._listen(socket.AF_UNIX, self.sock, "unix socket")
        self._listen(socket.AF_UNIX, f"\0speculate-escape-{self.tag}", "abstract socket")
        self.port = self._listen(socket.AF_INET, ("127.0.0.1", 0), "tcp")
        self.port6 = self._listen(socket.AF_INET6, ("::1", 0), "tcp6")
        self.host_sockets = HostSockets(self, self._stack)  # issue #22
        out = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True).stdout
        self.shmid = out.split(":")[-1].strip()
        self._stack.callback(lambda: subprocess.run(["ipcrm", "-m", self.shmid], capture_output=True))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        shutil.rmtree(self.host_tmp, ignore_errors=True)

    def fields(self, project: Path) -> dict[str, str]:
        return {
            "project": os.fspath(project),
            "home": os.fspath(self.home),
            "pid": str(self.canary.pid),
            "sock": self.sock,
            "port": str(self.port),
            "port6": str(self.port6),
            "shmid": self.shmid,
            "tag": self.tag,
            "host_tmp": os.fspath(self.host_tmp),
            "canary_cwd": os.fspath(self.canary_cwd),
            "cgroup_kill": self.cgroup_kill,
            "state": os.fspath(state_root()),
            **_syscall_numbers(),
            "sockets": self.host_sockets.field(),
        }

    def _stop_canary(self) -> None:
        self.canary.kill()
        self.canary.wait()

    def _canary_cgroup(self) -> str:
        """A v2 cgroup holding only the canary, when one can be made; else the canary's own cgroup."""
        unified = Path("/sys/fs/cgroup/unified")
        root = unified if unified.is_dir() else Path("/sys/fs/cgroup")
        cg = root / f"speculate-canary-{self.tag}"
        try:
            cg.mkdir()
            (cg / "cgroup.procs").write_text(str(self.canary.pid))
        except OSError:
            with contextlib.suppress(OSError):
                cg.rmdir()
            return os.fspath(root / "cgroup.kill")
        self._stack.callback(lambda: (self._stop_canary(), _rmdir_retry(cg)))
        return os.fspath(cg / "cgroup.kill")

    def _listen(self, family: int, addr: object, what: str) -> int:
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.bind(addr)
        srv.listen()
        srv.settimeout(0.2)
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    continue
                self.hits.append(what)
                conn.close()

        th = threading.Thread(target=accept, daemon=True)
        th.start()
        self._stack.callback(lambda: (stop.set(), th.join(), srv.close()))
        return srv.getsockname()[1] if family != socket.AF_UNIX else 0

    def canary_problem(self) -> str | None:
        if self.canary.poll() is not None:
            return f"the canary process died (status {self.canary.returncode})"
        status = Path(f"/proc/{self.canary.pid}/status").read_text()
        tracer = next(line.split()[1] for line in status.splitlines() if line.startswith("TracerPid:"))
        if tracer != "0":
            return f"the canary is traced by {tracer}"
        if subprocess.run(["ipcs", "-m", "-i", self.shmid], capture_output=True).returncode != 0:
            return "the host's SysV shared memory segment was removed"
        return None


def _syscall_numbers() -> dict[str, str]:
    import pyseccomp

    names = (
        "add_key",
        "bpf",
        "io_uring_setup",
        "perf_event_open",
        "process_vm_readv",
        "kcmp",
        "init_module",
        "kexec_load",
        "socket",
    )
    return {f"nr_{n}": str(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, n)) for n in names}


def _rmdir_retry(p: Path) -> None:
    for _ in range(100):
        try:
            p.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
