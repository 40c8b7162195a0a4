"""Pure renderers of the REPL's lines: one line per tool call, a hook's line, the accepted-speculation line,
the approval question's list, what a cancelled turn left; and the terminal's width."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from speculate.agent_types import ToolFinished
from speculate.hooks import HookRan
from speculate.speculation.accept import Landing
from speculate.speculation.approvals import PendingApproval, distinct


def columns() -> int:
    """The terminal's width (any of the standard streams that is one), else 80."""
    for stream in (sys.__stdout__, sys.__stdin__, sys.__stderr__):
        if stream is None:  # closed at start-up
            continue
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            continue
    return 80


def accepted_line(
    written: Sequence[str],
    tools: int,
    saved_s: float,
    width: int,
    *,
    deleted: Sequence[str] = (),
    renamed: Sequence[str] = (),
) -> str:
    """``⚡ speculation accepted: …`` in one line of ``width``: what happened to the person's files, as what
    it is (``deleted build/``, ``renamed a.py → b.py``, ``wrote c.py``; as many names as fit), tool caches
    (.pytest_cache, __pycache__, node_modules, .benchmarks: :func:`is_cache_dir`) summarised as a count.
    Any other file is named, a hidden one too (a hook's ``.audit/log.jsonl`` is no cache)."""

    def cache(path: str) -> str | None:
        parts = path.rstrip("/").split("/")
        return next(
            (d for d in parts[:-1] if is_cache_dir(d)), parts[-1] if is_cache_dir(parts[-1]) else None
        )

    dirs = {p.rsplit("/", 1)[0] for p in written if "/" in p}
    written = [p for p in written if not any(d == p or d.startswith(p + "/") for d in dirs)]  # files only
    groups = [
        ("deleted", sorted(p for p in deleted if cache(p) is None)),
        ("renamed", sorted(r.replace(" -> ", " → ") for r in renamed)),
        ("wrote", sorted(p for p in written if cache(p) is None)),
    ]
    cached = [p for p in (*written, *deleted) if cache(p) is not None]
    caches = sorted({c for p in cached if (c := cache(p)) is not None})
    head = f"⚡ speculation accepted: {tools} tool{'s' * (tools != 1)} ran ahead, saved {saved_s:.1f}s"
    tails = (
        [f"; {len(cached)} in caches ({', '.join(caches)})", f"; {len(cached)} in caches", ""]
        if caches
        else ["", ""]
    )
    for tail in tails:  # the cache names go first when the line is too long, then the count
        room = width - 1 - len(head) - len(tail)
        parts, complete = _fit(groups, room)
        if complete or (tail == tails[-2] and any(names for _, names, _ in parts)) or tail == tails[-1]:
            break
    return head + "".join(_group_text(verb, names, total) for verb, names, total in parts) + tail


CACHE_NAMES = frozenset({".benchmarks", ".hypothesis", ".nox", ".eggs", ".gradle", ".next", ".turbo"})


def is_cache_dir(name: str) -> bool:
    """A directory tools fill by themselves: the SKIP_DIRS ones, any ``*cache*``, a few known others."""
    from speculate.tools.common import SKIP_DIRS

    return (
        (name in SKIP_DIRS and name not in (".git", ".hg", ".svn"))
        or "cache" in name.lower()
        or name in CACHE_NAMES
    )


def _group_text(verb: str, names: list[str], total: int) -> str:
    if not total:
        return ""
    if not names:
        return f", {verb} {total} file{'s' * (total != 1)}"
    rest = total - len(names)
    return f", {verb} " + ", ".join(names) + (f" +{rest} more" if rest else "")


def _fit(groups: list[tuple[str, list[str]]], room: int) -> tuple[list[tuple[str, list[str], int]], bool]:
    """As many names of each group as fit in ``room`` characters, groups in order; whether all did."""
    out: list[tuple[str, list[str], int]] = []
    used = sum(len(_group_text(verb, [], len(items))) for verb, items in groups)  # every group as a count
    complete = True
    for verb, items in groups:
        shown: list[str] = []
        used -= len(_group_text(verb, [], len(items)))
        for item in items:
            text = _group_text(verb, [*shown, item], len(items))
            if used + len(text) > room:
                break
            shown.append(item)
        complete &= len(shown) == len(items)
        used += len(_group_text(verb, shown, len(items)))
        out.append((verb, shown, len(items)))
    return out, complete


def approval_lines(pending: Sequence[PendingApproval], project: Path | None = None) -> list[str]:
    """The approval question's list: what the speculation ran that needs the person's yes, and what each
    call changed in the overlay (the files git ignores in ``project`` counted in one clause, not listed)."""
    from speculate.repl.diffview import effect_words

    calls = distinct(pending)
    n = len(calls)
    rules = ", ".join(dict.fromkeys(p.rule for p in calls))
    return [
        f"the speculation ran {n} call{'s' * (n != 1)} you would have been asked about:",
        *(line for p in calls for line in (f"  {p.summary} → {effect_words(p, project)}", *_diff_lines(p))),
        "n or Esc: discard it and run the prompt normally (asking as usual); always: also allow "
        + ("this command" if n == 1 else "these commands")
        + f" for the rest of this session ({rules})",
    ]


def _diff_lines(p: PendingApproval, limit: int = 40) -> list[str]:
    """A deferred edit's diff under its line (the first ``limit`` lines, then how many more)."""
    lines = [f"    {line}" for line in p.diff.splitlines()]
    return lines[:limit] + (
        [f"    … {len(lines) - limit} more lines (/diff shows them all)"] if len(lines) > limit else []
    )


def tool_line(ev: ToolFinished) -> list[tuple[str, str]]:
    """One line per call: ✓ ran, ✗ failed, ✗ … denied; (colour, text) fragments. What it printed or why it
    was refused follows under it (:mod:`speculate.repl.toolview`)."""
    if ev.denied:
        return [("", "  "), ("31", "✗"), ("", f" {ev.summary} "), ("31", "denied")]
    mark = ("31", "✗") if ev.is_error else ("32", "✓")
    return [("", "  "), mark, ("", f" {ev.summary} "), ("2", f"{ev.duration_s:.2f}s")]


def hook_lines(ev: HookRan) -> list[list[tuple[str, str]]]:
    """A hook's lines: what it shows (its ``systemMessage`` or plain stdout), what it refused, a warning, output
    speculate cannot read, a stopped turn; none when there is nothing to say."""

    def first(text: str) -> str:
        return text.strip().splitlines()[0][:100] if text.strip() else ""

    on = f" on {ev.tool}" if ev.tool else ""
    out: list[list[tuple[str, str]]] = []
    if ev.timed_out:
        out.append([("33", f"  ⚠ {ev.event} hook `{ev.command}`{on} timed out and was killed")])
    elif ev.failed:
        out.append(
            [
                (
                    "33",
                    f"  ⚠ {ev.event} hook `{ev.command}`{on} failed (exit {ev.exit_code})"
                    + (f": {first(ev.stderr)}" if first(ev.stderr) else ""),
                )
            ]
        )
    if ev.blocked and ev.event != "UserPromptSubmit":  # a refused prompt is reported with the turn
        what = {"PreToolUse": "refused the call", "Stop": "keeps the turn going"}.get(ev.event, "feedback")
        out.append([("35", f"  ⛔ {ev.event} hook {what}{on}: {first(ev.reason)}")])
    elif first(ev.shown) and (
        ev.parsed.get("systemMessage") or (ev.exit_code == 0 and ev.event != "UserPromptSubmit")
    ):  # a prompt's stdout is the model's context
        out.append([("2", f"  ↪ {ev.event} hook{on}: {first(ev.shown)}")])
    if ev.parsed.problems:
        out.append(
            [
                (
                    "33",
                    f"  ⚠ {ev.event} hook `{ev.command}`{on} printed output speculate cannot read: "
                    f"{ev.parsed.problems[0][:120]}",
                )
            ]
        )
    if ev.stop_reason is not None:
        out.append([("35", f"  ⛔ {ev.event} hook stopped the turn{on}: {first(ev.stop_reason)}")])
    return out


def cancelled_line(landing: Landing | None, edits: Sequence[str]) -> str:
    """What a cancelled turn left in the project: of an accepted speculation, whether its files landed; of
    the live path, the files it had edited (they stay)."""

    def names(paths: Sequence[str]) -> str:
        shown = list(dict.fromkeys(paths))
        return ", ".join(shown[:5]) + (f" +{len(shown) - 5} more" if len(shown) > 5 else "")

    live = f"; files edited before the cancel stay as they are: {names(edits)}" if edits else ""
    if landing is None:
        return f"turn cancelled{live}; the session goes on"
    if landing.promoted:
        landed = landing.files.words() or "nothing"
        return (
            f"turn cancelled: the accepted speculation had landed ({landed}); what came after it was "
            f"stopped{live}; the session goes on"
        )
    if landing.dropped:
        return f"turn cancelled: the speculation was discarded, nothing of it was applied{live}; the session goes on"
    return (
        "turn cancelled: nothing of the accepted speculation was applied (what it showed above was "
        "discarded; the project is as it was); the session goes on"
    )
