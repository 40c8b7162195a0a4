"""Pure renderers of what a tool call did, as Claude Code shows it: the call's line, then its result
collapsed to its first lines (``ctrl+o`` or ``/last`` shows all), an edit as a coloured diff, a write as its
first lines; and the permission question's details (the full arguments, the diff it would make, what
``always`` allows). Every line is (SGR style, text) fragments for :func:`speculate.term.render`: the text is
untrusted and made visible there, the styles are ours."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speculate.agent_types import ToolFinished
from speculate.tools import registry

Line = list[tuple[str, str]]
BODY_LINES = 4  # result lines shown under a call
DIFF_LINES = 16  # diff lines shown under an edit
QUESTION_DIFF_LINES = 40  # diff lines shown in a permission question
READ_LIMIT = 1 << 20  # a file larger than this is not read for a permission question's diff
EXPAND = "ctrl+o or /last to expand"
_PRIMARY = ("command", "file_path", "pattern", "path", "url")  # after the tool's own path field


@dataclass
class Body:
    """What is shown under a call, and all of it (for ``/last``); ``hidden``: lines of ``full`` not shown."""

    shown: list[Line]
    full: list[Line]
    hidden: int = -1

    def __post_init__(self) -> None:
        if self.hidden < 0:  # the shown lines are the first lines of the full text
            self.hidden = len(self.full) - len(self.shown)


def diff_style(line: str) -> str:
    if line.startswith(("+++", "---", "diff --git")):
        return "1"
    if line.startswith("+"):
        return "32"
    if line.startswith("-"):
        return "31"
    if line.startswith("@@"):
        return "36"
    return "2" if line.startswith("\\") else ""


def coloured_diff(text: str | Sequence[str]) -> list[Line]:
    """A unified diff, one line each, additions green, removals red, hunk headers cyan."""
    lines = text.splitlines() if isinstance(text, str) else list(text)
    return [[(diff_style(ln), ln)] for ln in lines]


def file_diff(path: str, old: str | None, new: str) -> list[str]:
    """The whole file ``path`` going from ``old`` (None: absent) to ``new``, with line numbers in its hunk
    headers."""
    return list(
        difflib.unified_diff(
            (old or "").splitlines(),
            new.splitlines(),
            "/dev/null" if old is None else f"a/{path}",
            f"b/{path}",
            lineterm="",
            n=3,
        )
    )


def edited(tool: str, inp: dict[str, Any], current: str | None) -> str | None:
    """The file's text after this call of a file-writing tool, given its text now (None when it cannot be
    told): the tool says (:meth:`speculate.tools.base.Tool.edited`)."""
    cls = registry.get(tool)
    return cls.edited(inp, current) if cls is not None and cls.writes_files else None


def edit_lines(tool: str, inp: dict[str, Any]) -> list[str]:
    """What a file-writing call did, from its arguments alone (after the call the old text is gone)."""
    cls = registry.get(tool)
    return cls.change_lines(inp) if cls is not None and cls.writes_files else []


def _shown_as(tool: str) -> str:
    cls = registry.get(tool)
    return cls.shown_as if cls is not None else "output"


def tool_body(ev: ToolFinished) -> Body:
    """The lines under a finished call: a refusal's reason, an edit's diff, a Read's size, else its output."""
    text = ev.result.rstrip("\n")
    if ev.denied:
        full = [[("2", ln)] for ln in text.splitlines()]
        return Body(full[:1], full)
    shown_as = _shown_as(ev.name)
    if shown_as == "diff" and not ev.is_error:
        full = coloured_diff(edit_lines(ev.name, ev.input))
        return Body(full[:DIFF_LINES], full)
    lines = text.splitlines()
    if shown_as == "count" and not ev.is_error:
        full = [[("", ln)] for ln in lines]
        return Body([[("2", f"read {len(lines)} line{'s' * (len(lines) != 1)}")]], full, hidden=len(full))
    style = "31" if ev.is_error else "2"
    full = [[(style, ln)] for ln in lines]
    if not full and not ev.is_error:
        return Body([[("2", "(no output)")]], [])
    return Body(full[:BODY_LINES], full)


def body_lines(body: Body) -> list[Line]:
    """``body`` indented under its call line, with the collapsed remainder counted."""
    out = [[("2", "  ⎿  " if i == 0 else "     "), *line] for i, line in enumerate(body.shown)]
    if body.hidden > 0 and body.hidden == len(body.full):  # a summary line in place of the text
        out[-1].append(("2", f" ({EXPAND})"))
    elif body.hidden > 0:
        out.append([("2", f"     … +{body.hidden} line{'s' * (body.hidden != 1)} ({EXPAND})")])
    return out


def small_text(path: Path, limit: int = READ_LIMIT) -> str | None:
    """A regular UTF-8 file's text, for a question's diff; None when it is absent, large or not text."""
    try:
        if not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def full_call(tool: str, inp: dict[str, Any]) -> str:
    """The call with every argument: ``Bash(pytest -q, timeout=60)``, ``mcp__notes__word_count(text="hi")``
    (a Write's content and an Edit's strings are shown as the diff instead)."""
    cls = registry.get(tool)
    first = (registry.PATH_FIELDS[tool],) if tool in registry.PATH_FIELDS else ()
    primary = next((k for k in (*first, *_PRIMARY) if k in inp), None)
    as_diff = cls.diff_fields if cls is not None else ()
    parts = [str(inp[primary])] if primary is not None else []
    parts += [
        f"{k}={json.dumps(v, ensure_ascii=False)}"
        for k, v in inp.items()
        if k != primary and k not in as_diff
    ]
    return f"{tool}({', '.join(parts)})"


def question_lines(
    tool: str, inp: dict[str, Any], rule: str, read: Callable[[str], str | None]
) -> list[Line]:
    """What a permission question shows above itself: the full call, for a Write or Edit the diff it would
    make to the file (``read`` gives a file's text now, None if it cannot be read), and what ``always``
    allows (the rule, for the rest of this session)."""
    out: list[Line] = [[("1", "  " + full_call(tool, inp))]]
    if tool in registry.WRITE_TOOLS:
        path = registry.path_of(tool, inp) or ""
        current = read(path) if path else None
        after = edited(tool, inp, current)
        lines = file_diff(path, current, after)[2:] if after is not None else edit_lines(tool, inp)
        shown = coloured_diff(lines[:QUESTION_DIFF_LINES])
        out += [[("", "    "), *ln] for ln in shown]
        if len(lines) > QUESTION_DIFF_LINES:
            out.append([("2", f"    … +{len(lines) - QUESTION_DIFF_LINES} more diff lines")])
    scope = "this command" if tool in registry.SHELL_TOOLS and rule != tool else f"every {tool} call"
    out.append([("2", f"  always: allow {scope} for the rest of this session (rule {rule}); Esc: no")])
    return out
