"""Escape attempts on the host's processes and kernel: entering namespaces, reaching other processes
(signals, ptrace, ``/proc``, cross-process syscalls), device nodes and kernel interfaces (modules, kexec,
keys, bpf, io_uring, perf)."""

from __future__ import annotations

from tests.sandbox.escapes.attempt import CT, OK, VERDICT, Attempt, py

# -- entering namespaces ---------------------------------------------------------------------------
NAMESPACES: list[Attempt] = [
    Attempt(
        "nsenter-canary",
        "namespaces",
        f"nsenter -t {{pid}} -m -u -n -- touch /etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt(
        "setns-proc",
        "namespaces",
        py(
            "import os; fd = os.open('/proc/{pid}/ns/mnt', os.O_RDONLY); os.setns(fd, 0); "
            f"open('/etc/speculate-escape-{{tag}}', 'w'); print('{OK}')"
        ),
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt(
        "setns-pid1",
        "namespaces",
        py(f"import os; fd = os.open('/proc/1/ns/mnt', os.O_RDONLY); os.setns(fd, 0); print('{OK}')"),
        refused=True,
    ),
    Attempt("new-userns", "namespaces", f"unshare -U -r true && echo {OK}", refused=True),
]

# -- other processes -------------------------------------------------------------------------------
PROCESSES: list[Attempt] = [
    Attempt("kill-canary", "processes", f"kill -9 {{pid}} && echo {OK}", refused=True),
    Attempt("pkill-canary", "processes", f"pkill -9 -f speculate-canary-{{tag}} && echo {OK}", refused=True),
    Attempt("kill-all", "processes", "kill -9 -1; true"),
    Attempt("cgroup-kill", "processes", f"echo 1 > {{cgroup_kill}} && echo {OK}", refused=True),
    Attempt(
        "ptrace-canary", "processes", py(CT + "r = libc.ptrace(16, {pid}, 0, 0); " + VERDICT), refused=True
    ),
    Attempt(
        "ptrace-child",
        "processes",
        py(
            CT + "import subprocess; p = subprocess.Popen(['sleep', '5']); "
            "r = libc.ptrace(16, p.pid, 0, 0); p.kill(); " + VERDICT
        ),
        refused=True,
    ),
    Attempt("proc-environ", "processes", "cat /proc/{pid}/environ; cat /proc/*/environ 2>/dev/null; env"),
    Attempt(
        "proc-mem", "processes", py("f = open('/proc/{pid}/mem', 'rb'); print(f.read(64))"), refused=True
    ),
    Attempt(
        "process-vm-readv",
        "processes",
        py(CT + "r = libc.syscall({nr_process_vm_readv}, 1, 0, 0, 0, 0, 0); " + VERDICT),
        refused=True,
    ),
    Attempt(
        "kcmp",
        "processes",
        py(CT + "r = libc.syscall({nr_kcmp}, 1, 1, 0, 0, 0); " + VERDICT),
        refused=True,
    ),
    Attempt("see-host-processes", "processes", "cat /proc/{pid}/cmdline; ps -eo args"),
]

# -- device nodes and kernel interfaces ----------------------------------------------------------
DEVICES: list[Attempt] = [
    Attempt("mknod-block", "devices", f"mknod ./sda b 8 0 && echo {OK}", refused=True),
    Attempt("mknod-char", "devices", f"mknod ./mem c 1 1 && echo {OK}", refused=True),
    Attempt("dev-mem", "devices", f"head -c 16 /dev/mem >/dev/null && echo {OK}", refused=True),
    Attempt("kmsg", "devices", f"dmesg >/dev/null && echo {OK}", refused=True),
    Attempt(
        "modules",
        "devices",
        py(
            CT
            + "b = ctypes.create_string_buffer(64); r = libc.syscall({nr_init_module}, b, 64, b''); "
            + VERDICT
        ),
        refused=True,
    ),
    Attempt(
        "kexec",
        "devices",
        py(CT + "r = libc.syscall({nr_kexec_load}, 0, 0, None, 0); " + VERDICT),
        refused=True,
    ),
    Attempt(
        "keyctl",
        "devices",
        py(CT + "r = libc.syscall({nr_add_key}, b'user', b'x', b'y', 1, -2); " + VERDICT),
        refused=True,
    ),
    Attempt("bpf", "devices", py(CT + "r = libc.syscall({nr_bpf}, 0, None, 0); " + VERDICT), refused=True),
    Attempt(
        "io-uring",
        "devices",
        py(
            CT + "p = ctypes.create_string_buffer(120); "
            "r = libc.syscall({nr_io_uring_setup}, 4, p); " + VERDICT
        ),
        refused=True,
    ),
    Attempt(
        "perf",
        "devices",
        py(
            CT + "a = ctypes.create_string_buffer(128); "
            "r = libc.syscall({nr_perf_event_open}, a, 0, -1, -1, 0); " + VERDICT
        ),
        refused=True,
    ),
]
