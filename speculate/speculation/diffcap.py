"""The accepted speculation's diff, bounded and off the event loop (#34 item 9).

:meth:`overlayfs.Overlay.diff` is difflib's, which is quadratic on some inputs: a 1 MB rewrite of an 820 KB
lockfile took 106.6 s, computed on the REPL's event loop before promotion (Tab froze). Here the same
git-style diff is made in a worker thread (:func:`landing_diff`) under a time and a size bound; the matcher
checks the deadline at each step, so a diff past it stops instead of running on. Past either bound the
result is a summary instead: each file with its change, sizes and lines added and removed (counted as
multisets of lines, linear: at least as many as any diff shows), and why the diff was left out.
"""

from __future__ import annotations

import difflib
import functools
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import trio

from overlayfs.changes import DIFF_LIMIT, Change, compute_changes, file_diff
from speculate.errors import SpeculateError

TIME_S = 1.0  # the diff's time bound: past it, a summary
SIZE_BYTES = 8 << 20  # the most file content a diff reads in all (each file is capped at DIFF_LIMIT)
COUNT_BYTES = 64 << 20  # the most a summary reads to count lines (past it: sizes only)
GRACE_S = 1.0  # what the summary may take after the deadline before the loop stops waiting for it
COUNT_S = 0.5  # the summary counts lines for this long at most (then sizes only), to arrive within GRACE_S
MAX_ROWS = 200  # files listed by name in a summary; the rest are counted


class OverBound(SpeculateError):
    """The diff passed its time or size bound."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Matcher(difflib.SequenceMatcher):
    """difflib's matcher that stops at ``deadline`` (each step of its recursion is one longest match)."""

    def __init__(self, a: Sequence[str], b: Sequence[str], deadline: float) -> None:
        self.deadline = deadline
        super().__init__(None, a, b)

    def find_longest_match(self, *args: Any, **kwargs: Any) -> Any:
        if time.monotonic() > self.deadline:
            raise OverBound("time")
        return super().find_longest_match(*args, **kwargs)


def _range(start: int, stop: int) -> str:
    """A unified diff's range, as difflib writes it."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return str(beginning)
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def unified(a: list[str], b: list[str], fromfile: str, tofile: str, deadline: float) -> Iterator[str]:
    """``difflib.unified_diff(a, b, fromfile, tofile)``, line for line, raising OverBound at ``deadline``."""
    started = False
    for group in _Matcher(a, b, deadline).get_grouped_opcodes(3):
        if not started:
            started = True
            yield f"--- {fromfile}\n"
            yield f"+++ {tofile}\n"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from ("-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from ("+" + line for line in b[j1:j2])


class _Budget:
    def __init__(self, deadline: float, size: int) -> None:
        self.deadline, self.left = deadline, size

    def read(self, path: str, kind: str) -> bytes | None:
        if kind == "symlink":
            return os.fsencode(os.readlink(path))
        size = os.path.getsize(path)
        if size > DIFF_LIMIT:
            return None
        self.left -= size
        if self.left < 0:
            raise OverBound("size")
        if time.monotonic() > self.deadline:
            raise OverBound("time")
        with open(path, "rb") as f:
            return f.read()


def bounded_diff(
    lower: str,
    upper: str,
    changes: list[Change],
    *,
    time_s: float = TIME_S,
    size_bytes: int = SIZE_BYTES,
) -> str:
    """The git-style diff of ``changes`` (what :func:`overlayfs.changes.unified_diff` makes) if it takes
    under ``time_s`` and reads under ``size_bytes``; else :func:`summary`. Blocks: run it off the loop."""
    budget = _Budget(time.monotonic() + time_s, size_bytes)
    parts: list[str] = []
    try:
        for ch in changes:
            if ch.type in ("file", "symlink"):
                differ = functools.partial(unified, deadline=budget.deadline)
                parts.extend(file_diff(lower, upper, ch, read=budget.read, differ=differ))
    except OverBound as e:
        why = f"it took longer than {time_s:g} s" if e.why == "time" else f"it passed {_size(size_bytes)}"
        return summary(lower, upper, changes, why=why)
    return "\n".join(parts) + ("\n" if parts else "")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _lines(path: str, budget: list[int], stop_at: float) -> Counter[bytes] | None:
    try:
        size = os.path.getsize(path)
        if size > budget[0] or time.monotonic() > stop_at:
            return None
        budget[0] -= size
        with open(path, "rb") as f:
            return Counter(f.read().splitlines())
    except OSError:
        return None


def summary(lower: str, upper: str, changes: list[Change], *, why: str) -> str:
    """Each changed file with its change, sizes and lines added and removed: a diff's stat, linear in the
    bytes it reads (line counts stop at :data:`COUNT_BYTES` or after :data:`COUNT_S`; past that, sizes
    only), the first :data:`MAX_ROWS` files by name."""
    budget, stop_at = [COUNT_BYTES], time.monotonic() + COUNT_S
    rows: list[str] = []
    plus = minus = counted_in = 0
    files = [ch for ch in changes if ch.type in ("file", "symlink")]
    for ch in files:
        lp, up = f"{lower}/{ch.path}", f"{upper}/{ch.path}"
        old_sz = os.lstat(lp).st_size if ch.kind != "added" and os.path.lexists(lp) else None
        new_sz = os.lstat(up).st_size if ch.kind != "deleted" and os.path.lexists(up) else None
        sizes = " -> ".join(_size(s) for s in (old_sz, new_sz) if s is not None)
        counted = ""
        if ch.type == "file":
            old = _lines(lp, budget, stop_at) if old_sz is not None and os.path.isfile(lp) else Counter()
            new = _lines(up, budget, stop_at) if new_sz is not None else Counter()
            if old is not None and new is not None:
                added, removed = sum((new - old).values()), sum((old - new).values())
                plus, minus, counted_in = plus + added, minus + removed, counted_in + 1
                counted = f", +{added} -{removed} lines"
        rows.append(f" {ch.path} | {ch.kind}, {sizes}{counted}")
    if len(rows) > MAX_ROWS:
        rows[MAX_ROWS:] = [f" ... and {len(rows) - MAX_ROWS} more files"]
    head = f"(the diff is left out: {why}; a summary instead)"
    texts = sum(ch.type == "file" for ch in files)
    tail = f" {len(files)} file{'s' if len(files) != 1 else ''} changed, +{plus} -{minus} lines" + (
        f" (counted in {counted_in} of {texts} files)" if counted_in < texts else ""
    )
    return "\n".join([head, *rows, tail]) + "\n"


def overlay_diff(ov: Any, *, time_s: float = TIME_S, size_bytes: int = SIZE_BYTES) -> str:
    """``ov.diff()`` bounded (blocks for about ``time_s`` at most, plus a summary's linear read). Reads the
    layers by path only (no state of ``ov``'s), so that a worker left running alone shares nothing."""
    lower, upper = str(ov.lower), str(ov.upper)
    return _diff_at(lower, upper, time_s, size_bytes)


def _diff_at(lower: str, upper: str, time_s: float, size_bytes: int) -> str:
    return bounded_diff(lower, upper, compute_changes(lower, upper), time_s=time_s, size_bytes=size_bytes)


async def landing_diff(ov: Any, *, time_s: float = TIME_S, size_bytes: int = SIZE_BYTES) -> str:
    """:func:`overlay_diff` in a worker thread: the event loop (the REPL's keys) goes on meanwhile. A worker
    still busy ``GRACE_S`` past its bound is left to finish alone and a note returned instead."""
    lower, upper = str(ov.lower), str(ov.upper)
    with trio.move_on_after(time_s + GRACE_S):
        return await trio.to_thread.run_sync(
            lambda: _diff_at(lower, upper, time_s, size_bytes), abandon_on_cancel=True
        )
    return f"(the diff is left out: it took longer than {time_s + GRACE_S:g} s, summary included)\n"
