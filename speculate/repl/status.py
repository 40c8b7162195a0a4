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
    abstained: str = ""  # the policy forked none of the candidates: its estimate, said in the toolbar
    rank: int = 0  # top-K: the candidate whose fork the toolbar follows (0: the ghost text's)
    forks: int = 0  # top-K: how many forks this cycle runs

    def update(self, ev: SpecEvent) -> None:
        d = ev.detail
        self.state = ev.state
        if "rank" in d:
            self.rank, self.forks = int(d["rank"]), int(d.get("forks", self.forks))
        if ev.state == "generating":
            self.abstained, self.rank, self.forks = "", 0, 0
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
            if d.get("abstained"):
                self.abstained = _estimate(d)
            elif ev.state != "idle":
                self.abstained = ""
            self.suggestion, self.started, self.elapsed_s = None, None, None
            if ev.state == "accepted" and "time_saved_s" in d:
                self.saved_s += float(d["time_saved_s"])

    def _which(self) -> str:
        """Top-K: which candidate's fork the toolbar follows, of how many forks."""
        if self.forks <= 1 and self.rank == 0:
            return ""
        return f"; candidate {self.rank + 1}, {self.forks} fork{'s' * (self.forks != 1)}"

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
        tools = f"{self.tools_run} tool{'s' if self.tools_run != 1 else ''}" + self._which()
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
        elif self.abstained:
            what = f"no fork: the policy abstained ({self.abstained})"
        else:
            what = "idle"
        what = visible(what)
        head = ["working"] if self.busy else []
        # In a study the time saved tells which turns were speculative: said at the end, or on /study.
        tail = [self.mode] if self.study else [f"saved {self.saved_s:.1f}s", self.mode]
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
            rest = clip(what[cut + 1 :], room)
            return " │ ".join([*head, what[:cut]]) + "\n" + " │ ".join([rest, *tail])[:width]
        return " │ ".join([*head, clip(what, room), *tail])[:width]


_PATH = re.compile(r"(?:/[^\s/:()]+){3,}")  # an absolute path of three parts or more


def clip(text: str, room: int) -> str:
    """``text`` in ``room`` columns: cut at the last word boundary that fits, trailing punctuation dropped,
    then an ellipsis."""
    if len(text) <= room:
        return text
    cut = text[: max(room - 1, 0)]
    if text[len(cut)] != " ":  # the cut falls inside a word: end before it (no word fits: only the ellipsis)
        space = cut.rfind(" ")
        cut = cut[:space] if space > 0 else ""
    return cut.rstrip(" ,;:-–(") + "…"


def _estimate(d: dict[str, object]) -> str:
    """The policy's numbers for the best candidate: P(accept), expected saving, expected cost."""
    try:
        p, s, c = float(d["p_accept"]), float(d["expected_saving_s"]), float(d["expected_cost_usd"])  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return "no estimate"
    return f"P {p:.0%}, saves ~{s:.1f}s, costs ~${c:.4f}"
