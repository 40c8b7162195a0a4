"""The live line under a running turn: a spinner, what runs (``Working…`` or the tool), the elapsed time, the
tokens streamed, ``esc to interrupt``, and the keys typed ahead (kept for the next prompt).

A small reducer over the turn's events (:class:`TurnLine`) and a pure renderer (:meth:`TurnLine.render`);
the controller draws it at the bottom while nothing else is being written, and erases it before writing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from speculate.term import visible

FRAMES = ("·", "✢", "✳", "✶", "✻", "✽", "✻", "✶", "✳", "✢")
_SEQUENCE = re.compile(
    r"\x1b(\[[0-9;?]*[ -/]*[@-~]|O.|.)?", re.S
)  # an escape sequence: an arrow, F-key, Alt-x


def typed_ahead(raw: str) -> str:
    """Keys typed during a turn as they will read in the next prompt: Backspace and Ctrl-U applied,
    escape sequences (arrows) dropped, Enter shown as ⏎, other control keys dropped."""
    out: list[str] = []
    for ch in _SEQUENCE.sub("", raw):
        if ch in "\x7f\x08":
            if out:
                out.pop()
        elif ch == "\x15":
            out.clear()
        elif ch in "\r\n":
            out.append("⏎")
        elif ch == "\t" or ch >= " ":
            out.append(ch)
    return "".join(out)


@dataclass
class TurnLine:
    started: float = field(default_factory=time.perf_counter)
    activity: str = "Working"  # or the running tool's summary
    tokens: int = 0  # output tokens of the turn's finished responses
    streamed: int = 0  # characters of the response streaming now (about 4 to a token)
    frame: int = 0

    def tool_started(self, summary: str) -> None:
        self.activity = summary

    def tool_finished(self) -> None:
        self.activity = "Working"

    def text(self, delta: str) -> None:
        self.streamed += len(delta)

    def response_done(self, output_tokens: int) -> None:
        self.tokens += output_tokens
        self.streamed = 0

    def render(self, width: int, typeahead: str = "", now: float | None = None) -> list[tuple[str, str]]:
        """One line of at most ``width - 1`` columns (it must never wrap: the next write erases one line)."""
        self.frame += 1
        elapsed = (time.perf_counter() if now is None else now) - self.started
        tokens = self.tokens + self.streamed // 4
        counts = f"{elapsed:.0f}s" + (f" · ↓ {_count(tokens)} tokens" if tokens else "")
        head = f"{FRAMES[self.frame % len(FRAMES)]} "
        what = visible(self.activity) + "…"
        tail = f" ({counts} · esc to interrupt)"
        ahead = visible(typed_ahead(typeahead))
        room = width - 1
        line = [("35", head), ("", what), ("2", tail)]
        used = len(head) + len(what) + len(tail)
        if used > room:  # the tool's summary gives way first
            keep = max(room - len(head) - len(tail) - 1, 8)
            line[1] = ("", what[:keep] + "…")
            used = len(head) + len(line[1][1]) + len(tail)
        if ahead and used + 4 < room:
            shown = ahead if used + 3 + len(ahead) <= room else "…" + ahead[-(room - used - 4) :]
            line.append(("36", f"  › {shown}"))
        text_len = sum(len(t) for _, t in line)
        if text_len > room:
            return _cut(line, room)
        return line


def _count(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _cut(line: list[tuple[str, str]], room: int) -> list[tuple[str, str]]:
    out, left = [], room
    for style, text in line:
        if left <= 0:
            break
        out.append((style, text[:left]))
        left -= len(text[:left])
    return out
