"""The simulated user: how long they think before each prompt and how long entering it takes. They always
mean to send the scenario's prompt (the intent) and take the suggestion only when it is that prompt; the
acceptance sweep moves the *model's* hit rate (speculate.sim.draw), never the user's intent, so every turn
stays on its script.

Think time and input time are separate on purpose: speculation overlaps both, but only thinking is
independent of the suggestion (accepting with Tab is much faster than typing).

Defaults (assumptions, not measurements; sweep them with ``--sweep-think`` / ``--think-time``):

- think time: log-normal with median 5 s and sigma 0.9 (heavy right tail: p90 ≈ 16 s, p99 ≈ 41 s),
  truncated at 60 s so one draw cannot dominate a run's wall time;
- typing: 5 characters per second (about 60 words per minute) plus 0.3 s to press Enter;
- accepting a suggestion: 0.2 s (Tab, then Enter).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from speculate.sim.latency import rng_for

LOGNORMAL_MEDIAN_S = 5.0
LOGNORMAL_SIGMA = 0.9
LOGNORMAL_CAP_S = 60.0
TYPING_CHARS_PER_S = 5.0
ENTER_S = 0.3
TAB_ACCEPT_S = 0.2
CYCLE_S = 0.15  # top-K: one more key press to bring the next candidate into the ghost text (an assumption)


class ThinkTime(Protocol):
    """A think-time distribution; ``label`` names it in results ("lognormal", "fixed:2", ...)."""

    label: str

    def draw(self, rng: random.Random) -> float: ...


@dataclass(frozen=True)
class LogNormalThink:
    median_s: float = LOGNORMAL_MEDIAN_S
    sigma: float = LOGNORMAL_SIGMA
    cap_s: float = LOGNORMAL_CAP_S
    label: str = "lognormal"

    def draw(self, rng: random.Random) -> float:
        return min(self.cap_s, rng.lognormvariate(math.log(self.median_s), self.sigma))


@dataclass(frozen=True)
class FixedThink:
    seconds: float
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", f"fixed:{self.seconds:g}")

    def draw(self, rng: random.Random) -> float:
        return self.seconds


@dataclass(frozen=True)
class EmpiricalThink:
    """Resamples observed think times (seconds) with replacement."""

    samples: tuple[float, ...]
    label: str = "empirical"

    def draw(self, rng: random.Random) -> float:
        return rng.choice(self.samples)


def load_empirical(path: Path) -> EmpiricalThink:
    """One number per line (seconds); blank lines and ``#`` comments are skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ValueError(f"--think-time file:{path}: cannot read: {e.strerror or e}") from None
    values: list[float] = []
    for n, line in enumerate(lines, 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        values.append(_seconds(s, f"--think-time file:{path}:{n}"))
    if not values:
        raise ValueError(f"--think-time file:{path}: no think times in the file")
    return EmpiricalThink(tuple(values), label=f"empirical:{path.name}")


def parse_think(spec: str) -> ThinkTime:
    """``lognormal`` | ``lognormal:MEDIAN,SIGMA`` | ``fixed:SECONDS`` | ``file:PATH``."""
    kind, _, arg = spec.partition(":")
    if kind == "lognormal":
        if not arg:
            return LogNormalThink()
        try:
            median, sigma = (float(x) for x in arg.split(","))
        except ValueError:
            raise ValueError(f"--think-time {spec!r}: expected lognormal:MEDIAN,SIGMA") from None
        if median <= 0 or sigma < 0:
            raise ValueError(f"--think-time {spec!r}: median must be > 0 and sigma >= 0")
        return LogNormalThink(median, sigma, label=f"lognormal:{median:g},{sigma:g}")
    if kind == "fixed":
        return FixedThink(_seconds(arg, f"--think-time {spec!r}"))
    if kind == "file":
        if not arg:
            raise ValueError(f"--think-time {spec!r}: expected file:PATH")
        return load_empirical(Path(arg))
    raise ValueError(f"--think-time {spec!r}: expected lognormal, fixed:SECONDS or file:PATH")


def _seconds(s: str, what: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"{what}: not a number: {s!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{what}: think time must be >= 0 seconds, got {s!r}")
    return v


def typing_s(text: str, chars_per_s: float = TYPING_CHARS_PER_S) -> float:
    return len(text) / chars_per_s + ENTER_S


@dataclass(frozen=True)
class PlannedTurn:
    """What the user will do before turn ``index``: think, then enter ``text`` (the scenario's prompt)."""

    index: int
    text: str
    think_s: float  # user seconds (the harness multiplies by the time scale)
    scripted_suggestion: str | None  # the suggestion the simulator draws before this turn (same seed)


def plan_turns(prompts: Sequence[str], suggestions: Sequence[str | None], *, think: ThinkTime, seed: int,
               scenario: str, rep: int) -> list[PlannedTurn]:
    """The prompt sequence both arms of a pair send, with think times.

    ``suggestions[i]`` is the suggestion drawn after turn ``i``; the user accepts it when it equals the
    next prompt. Think times come from a private RNG per (seed, scenario, rep), so the arms draw the same.
    """
    think_rng = rng_for(seed, scenario, rep, "think")
    return [PlannedTurn(i, prompt, think.draw(think_rng) if i > 0 else 0.0,  # nothing to speculate before turn 0
                        suggestions[i - 1] if i > 0 else None)
            for i, prompt in enumerate(prompts)]
