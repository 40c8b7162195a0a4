"""The speculation state shown in the toolbar: a small reducer over SpecEvents, rendered as one line (its
untrusted parts, such as a boundary's command, made :func:`speculate.term.visible`)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from speculate.speculation.events import SpecEvent
from speculate.term import visible


@dataclass
class Status:
    state: str = "idle"
    suggestion: str | None = None
    tools_run: int = 0
    started: float | None = None  # perf_counter when the fork started
    elapsed_s: float | None = None  # frozen once the fork finished
    boundary: str = ""
    approvals: int = 0  # calls the fork ran that accepting will ask about
    saved_s: float = 0.0  # time saved this session (accepted speculations)
    mode: str = "acceptEdits"
    spec_on: bool = True
    busy: bool = False  # a turn is running
    study: bool = False  # a study runs: the speculation's state would tell the turn's arm, so it is not shown

    def update(self, ev: SpecEvent) -> None:
        d = ev.detail
        self.state = ev.state
        if ev.state == "generating":
            self.suggestion, self.tools_run, self.started, self.elapsed_s, self.boundary = (
                None,
                0,
                None,
                None,
                "",
            )
            self.approvals = 0
        elif ev.state == "speculating":
            self.suggestion = ev.suggestion
            self.tools_run = int(d.get("tools_run", self.tools_run))
            if self.started is None:
                self.started = ev.at - float(d.get("elapsed_s", 0.0))
        elif ev.state in ("ready", "boundary"):
            self.tools_run = int(d.get("tools_run", self.tools_run))
            self.approvals = int(d.get("approvals", 0))
            self.elapsed_s = float(d.get("elapsed_s", (ev.at - self.started) if self.started else 0.0))
            if ev.state == "boundary":
                what = str(d.get("detail") or d.get("boundary_detail") or "")
                self.boundary = f"{d.get('boundary', '?')}: {what}" if what else str(d.get("boundary", "?"))
        elif ev.state in ("idle", "aborted", "accepted"):
            self.suggestion, self.started, self.elapsed_s = None, None, None
            if ev.state == "accepted" and "time_saved_s" in d:
                self.saved_s += float(d["time_saved_s"])

    def _to_approve(self) -> str:
        n = self.approvals
        return f", {n} to approve" if self.state == "ready" and n else (f"; {n} to approve" if n else "")

    def set_speculation(self, on: bool) -> None:
        """/spec on|off: a fresh state (not the last speculation's "aborted")."""
        self.spec_on = on
        self.state, self.suggestion, self.started, self.elapsed_s, self.boundary = (
            "idle",
            None,
            None,
            None,
            "",
        )

    def elapsed(self, now: float | None = None) -> float:
        if self.elapsed_s is not None:
            return self.elapsed_s
        if self.started is None:
            return 0.0
        return (time.perf_counter() if now is None else now) - self.started

    def line(self, now: float | None = None, width: int | None = None) -> str:
        """The toolbar text, e.g. ``speculating (3 tools, 2.1s) │ saved 4.2s │ acceptEdits``, fitted to
        ``width``: paths shortened to their last parts first, then the state (a stop reason) wrapped onto
        a second line at a space, and only what is still too long cut with an ellipsis."""
        tools = f"{self.tools_run} tool{'s' if self.tools_run != 1 else ''}"
        if self.study:
            what = "study (/study: past turns' arms)"
        elif not self.spec_on:
            what = "speculation off"
        elif self.state == "generating":
            what = "generating suggestion…"
        elif self.state == "speculating":
            what = f"speculating ({tools}, {self.elapsed(now):.1f}s)"
        elif self.state == "ready":
            what = f"ready ({tools}, {self.elapsed(now):.1f}s{self._to_approve()}) - Tab to accept"
        elif self.state == "boundary":
            what = f"stopped at boundary ({self.boundary}){self._to_approve()}"
        elif self.state == "accepted":
            what = "accepted"
        elif self.state == "aborted":
            what = "speculation aborted"
        else:
            what = "idle"
        what = visible(what)
        head = ["working"] if self.busy else []
        tail = [f"saved {self.saved_s:.1f}s", self.mode]
        text = " │ ".join([*head, what, *tail])
        if width is None or len(text) <= width:
            return text
        what = _PATH.sub(lambda m: "…/" + "/".join(m.group(0).rstrip("/").split("/")[-2:]), what)
        room = width - len(" │ ".join([*head, "", *tail]))
        if len(what) <= room:
            return " │ ".join([*head, what, *tail])[:width]
        first_room = width - len(" │ ".join([*head, ""]))
        cut = what.rfind(" ", 0, first_room + 1)
        if cut > 0 and len(what) - cut - 1 <= room:  # two lines: the state, then the rest and the tail
            return " │ ".join([*head, what[:cut]]) + "\n" + " │ ".join([what[cut + 1 :], *tail])
        if cut > 0:
            rest = what[cut + 1 :]
            rest = rest[: max(room - 1, 0)] + "…"
            return " │ ".join([*head, what[:cut]]) + "\n" + " │ ".join([rest, *tail])[:width]
        return " │ ".join([*head, what[: max(room - 1, 0)] + "…", *tail])[:width]


_PATH = re.compile(r"(?:/[^\s/:()]+){3,}")  # an absolute path of three parts or more
