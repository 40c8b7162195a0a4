"""Progress of a run on stderr: sessions done per arm, and the ETA per arm and overall."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.plan import Job

ARMS = ("plain", "suggest", "speculative")


class Progress:
    """Per-arm counts and ETA on stderr (one line per finished session, at most every ``every`` s)."""

    def __init__(self, jobs: list[Job], concurrency: int, write: Callable[[str], None] | None) -> None:
        self.arms = [a for a in ARMS if any(j.arm == a for j in jobs)]
        self.total = {a: sum(j.arm == a for j in jobs) for a in self.arms}
        self.done: dict[str, list[float]] = {a: [] for a in self.arms}
        self.concurrency = concurrency
        self.write = write
        self.t0 = time.perf_counter()

    def finished(self, job: Job, seconds: float) -> None:
        self.done[job.arm].append(seconds)
        if self.write is not None:
            self.write(self.line())

    def line(self) -> str:
        parts = []
        remaining_work = 0.0
        for a in self.arms:
            d = self.done[a]
            left = self.total[a] - len(d)
            avg = sum(d) / len(d) if d else None
            eta = "?" if avg is None else _mmss(left * avg / max(1, self.concurrency / len(self.arms)))
            remaining_work += left * (avg or 0.0)
            parts.append(f"{a} {len(d)}/{self.total[a]} (ETA {eta})")
        total_eta = _mmss(remaining_work / max(1, self.concurrency))
        return (
            f"[bench {_mmss(time.perf_counter() - self.t0)}] "
            + " · ".join(parts)
            + f" · overall ETA {total_eta}"
        )


def _mmss(s: float) -> str:
    s = max(0, round(s))
    return f"{s // 60}:{s % 60:02d}"
