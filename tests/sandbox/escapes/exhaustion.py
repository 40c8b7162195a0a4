"""Escape attempts on the host's resources: disk (the upper layer, the sandbox's ``/tmp``), memory,
processes and time, and the upper layer's hard bound (bytes and inodes)."""

from __future__ import annotations

from tests.sandbox.escapes.attempt import OK, Attempt, MiB, py

BOUND_LIMITS = {"upper_bytes": 32 * MiB, "upper_inodes": 2_000}  # the bound-* attempts' (small) bound
BOUND_TINY = "mkdir tiny && cd tiny && seq 1 600 | xargs touch && cd .."

# -- exhaustion ------------------------------------------------------------------------------------
EXHAUSTION: list[Attempt] = [
    Attempt(
        "disk-upper",
        "exhaustion",
        "dd if=/dev/zero of=big bs=1M count=400 2>&1; echo done",
        ("{host_tmp}",),
        limits={"upper_bytes": 64 * MiB},
    ),
    Attempt(
        "disk-upper-many",
        "exhaustion",
        "for i in 1 2 3 4 5 6 7 8 9 10; do dd if=/dev/zero of=f$i bs=1M count=30 2>/dev/null; sleep 0.2; done",
        ("{host_tmp}",),
        limits={"upper_bytes": 64 * MiB},
    ),
    Attempt(
        "disk-tmp",
        "exhaustion",
        f"dd if=/dev/zero of=/tmp/big bs=1M count=400 && echo {OK}",
        ("{host_tmp}",),
        refused=True,
        limits={"tmp_bytes": 16 * MiB},
    ),
    Attempt(
        "memory",
        "exhaustion",
        py(f"b = bytearray(2 << 30); print('{OK}')"),
        refused=True,
        limits={"memory_bytes": 256 * MiB},
    ),
    Attempt(
        "processes",
        "exhaustion",
        py(
            "import os, time\nn = 0\ntry:\n    while n < 400:\n        if os.fork() == 0:\n"
            "            time.sleep(20); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\n"
            "print('forked', n)\nif n >= 400: print('" + OK + "')"
        ),
        refused=True,
        limits={"processes": 64},
        timeout=8,
    ),
    Attempt("time", "exhaustion", f"sleep 60 && echo {OK}", refused=True, timeout=1),
    # -- exhaustion: the upper layer's hard bound (issue 22, E5) ------------------------------------------
    # Many empty files first (they slowed the scan of the old polling bound), then a fast filler that
    # swallows its errors; the filesystem must stop each at the bound (bytes at most 1 MiB over, inodes at
    # most the bound) and the run must be flagged. Small bounds keep each attempt to a few seconds.
    *[
        Attempt(name, "exhaustion", f"{BOUND_TINY}; {filler}", limits=BOUND_LIMITS)
        for name, filler in (
            (
                "bound-fallocate",
                "i=0; while fallocate -l 1M fa$i 2>/dev/null; do i=$((i+1)); done; echo filled $i",
            ),
            (
                "bound-dd",
                "i=0; while dd if=/dev/zero of=dd$i bs=1M count=3 2>/dev/null; do i=$((i+1)); done; "
                "echo filled $i",
            ),
            (
                "bound-inodes",
                py(
                    "n = 0\ntry:\n    while n < 10**6:\n        open(f'i{{n}}', 'w').close()\n"
                    "        n += 1\nexcept OSError:\n    pass\nprint('made', n)"
                ),
            ),
            # Fills, then removes what it wrote: only the bound is promised here; flagged where the FUSE
            # server sees the refusal (our fuse backend), and where a look between two writes catches it.
            (
                "bound-fill-and-hide",
                "i=0; while dd if=/dev/zero of=dd$i bs=1M count=3 2>/dev/null; do i=$((i+1)); "
                "done; rm -f dd*; echo hidden",
            ),
        )
    ],
]
