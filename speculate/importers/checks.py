"""Expectations from recorded tool results: what a replay of a step must show, where a replay can show it.

A step's ``expect`` holds for every tool result of the step, or is a list with one entry per call
(docs/scenarios.md): every call the replay can be held to gets its own, with its own output fragment, and a
call it cannot (a command on a partial tree) gets ``null``. Checkable:

- Read: the file's replayed content is known (:class:`.tree.Replayed`): exit 0 and a distinctive line the
  recorded result showed that the replayed file also holds; the file is in the replayed tree, its content
  unknown: exit 0; a Read that failed on a file known to be absent: exit 1.
- Edit: the replayed file holds ``old_string`` as the Edit needs it: exit 0. Write: exit 0.
- A Read or Edit that succeeded on a file the replayed tree lacks (the transcript never showed it): exit 0,
  marked ``diverges``: the replay will fail it, and its check says so rather than passing in silence.
- Bash, Glob, Grep: only when the whole starting tree is known (``--repo``) and nothing was redacted: Bash's
  recorded exit code and, from its output, the last line free of times, dates and ids (durations and long
  numbers become ``\\d+``); Glob and Grep: exit 0 when they succeeded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from speculate.importers.sessions import ToolUse
from speculate.importers.tree import MISSING, UNKNOWN, FileState, project_path, recorded_read

_EXIT = re.compile(r"^(?:Error: )?Exit code (-?\d+)\b")
# Lines whose text changes from run to run: clock times, dates, hex ids, temporary paths.
_VOLATILE = re.compile(
    r"\b\d{1,2}:\d{2}(:\d{2})?\b|\b\d{4}-\d{2}-\d{2}\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)"
    r"[0-9a-f]{7,}\b|\b\d{7,40}\b|/tmp/|/var/folders/"
)  # times, dates, hashes (an abbreviated git hash is all digits one time in 27), temp paths
_NUMBER = re.compile(r"\d+\.\d+|\d{4,}")  # durations, sizes, pids: generalised to \d+
MIN_LINE, MAX_LINE = 8, 120


@dataclass(frozen=True)
class Check:
    exit_code: int
    contains: str | None = None
    matches: str | None = None
    diverges: bool = False  # the record succeeded on a file the replayed tree lacks: the replay will not


@dataclass(frozen=True)
class Context:
    tree_complete: bool  # the whole starting tree is known (--repo), so commands see what they saw
    redacted: bool
    root: str | None  # the recorded project root (lines naming it are not used as fragments)


def bash_exit(use: ToolUse) -> int | None:
    """The exit code a recorded Bash result reports (0 for success), None when it did not exit normally."""
    r = use.result
    if r is None:
        return None
    s = r.structured
    if isinstance(s, dict) and (
        s.get("interrupted") or s.get("backgroundTaskId") or s.get("returnCodeInterpretation")
    ):
        return None  # Claude Code calls some non-zero exits success ("No matches found") and drops the code
    m = _EXIT.match(r.text)
    if m:
        return int(m.group(1))
    return None if r.is_error else 0


def bash_output(use: ToolUse) -> str:
    r = use.result
    if r is None:
        return ""
    s = r.structured
    if isinstance(s, dict) and isinstance(s.get("stdout"), str):
        return "\n".join(x for x in (s["stdout"], s.get("stderr") or "") if isinstance(x, str))
    return _EXIT.sub("", r.text, count=1)


def stable_line(output: str, root: str | None) -> tuple[str | None, str | None]:
    """(contains, matches) for the last line of ``output`` that a rerun should print again, or (None, None)."""
    for line in reversed([x.strip() for x in output.splitlines()]):
        if not MIN_LINE <= len(line) <= MAX_LINE or _VOLATILE.search(line) or (root and root in line):
            continue
        if not _NUMBER.search(line):
            return line, None
        parts = _NUMBER.split(line)
        return None, r"\d+(?:\.\d+)?".join(re.escape(p).replace("\\ ", " ") for p in parts)
    return None, None


def read_line(shown: str, replayed: str) -> str | None:
    """The longest line the Read showed that the replayed file also holds (a distinctive one)."""
    best: str | None = None
    for line in shown.splitlines():
        s = line.strip()
        if MIN_LINE <= len(s) <= MAX_LINE and s in replayed and (best is None or len(s) > len(best)):
            best = s
    return best


def check(use: ToolUse, call: dict[str, Any], before: FileState, ctx: Context) -> Check | None:
    """What the replay of this call must show, or None when the replay cannot be held to the record.

    ``call`` is the call as scripted (after redaction); ``before`` the replayed state of its file."""
    r = use.result
    if r is None:
        return None
    name = next(iter(call))
    inp = call[name]
    inside = project_path(use.input.get("file_path"), ctx.root) is not None
    if name in ("Read", "Edit") and inside and not r.is_error and (before is MISSING or before is None):
        return Check(0, diverges=True)
    if name == "Read":
        if r.is_error:
            return Check(1) if before is None or before is MISSING else None
        if before is UNKNOWN and inside:
            return Check(0)  # the replayed file exists; what it holds is not known
        shown = recorded_read(use)
        if not isinstance(before, str) or shown is None:
            return None
        line = read_line(shown, before)
        return Check(0, contains=line)
    if name == "Edit":
        old = inp.get("old_string", "")
        ok = (
            isinstance(before, str)
            and old
            and (before.count(old) == 1 or (inp.get("replace_all") and old in before))
        )
        return Check(0) if ok and not r.is_error else None
    if name == "Write":
        return None if r.is_error else Check(0)  # a Write in the project creates what it needs
    if not ctx.tree_complete or ctx.redacted:
        return None
    if name == "Bash":
        code = bash_exit(use)
        if code is None:
            return None
        contains, matches = stable_line(bash_output(use), ctx.root)
        return Check(code, contains, matches)
    if name in ("Glob", "Grep"):
        return None if r.is_error else Check(0)
    return None


def _one(c: Check) -> dict[str, Any]:
    out: dict[str, Any] = {"exit_code": c.exit_code}
    if c.contains:
        out["contains"] = c.contains
    if c.matches:
        out["matches"] = c.matches
    return out


def step_expect(checks: list[Check | None]) -> dict[str, Any] | list[dict[str, Any] | None] | None:
    """The step's ``expect``: one mapping when it holds for every call (a single call, or several with one
    exit code and no fragment), else one entry per call (``None`` for a call the replay cannot be held to),
    so that every checkable result is checked; None when no call is checkable."""
    if not checks or all(c is None for c in checks):
        return None
    if len(checks) == 1 and checks[0] is not None:
        return _one(checks[0])
    done = [c for c in checks if c is not None]
    if (
        len(done) == len(checks)
        and len({c.exit_code for c in done}) == 1
        and not any(c.contains or c.matches for c in done)
    ):
        return {"exit_code": done[0].exit_code}
    return [None if c is None else _one(c) for c in checks]
