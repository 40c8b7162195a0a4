"""The simulated user: how long they think before each prompt, how long entering it takes, and when they
take a suggestion. They always mean to send the scenario's prompt (the intent) and take a suggestion when
their decision rule (``--accept-rule``, :data:`ACCEPT_RULES`) says it is that prompt; the acceptance sweep
moves the *model's* hit rate (speculate.sim.draw), never the user's intent, so every turn stays on its
script.

Decision rules (default :data:`DEFAULT_ACCEPT_RULE`):

- ``exact``: the suggestion is the intent byte for byte (the rule before issue #36);
- ``normalized``: equal after case folding, collapsing whitespace and dropping trailing punctuation ("make
  it print the list of valid ids" for "Make it print the list of valid ids.");
- ``outcome``: taking it would give the same tree and answer as sending the intent: in the simulator, the
  steps the suggestion's fork is scripted to run (the intent turn's own when the simulator reads the
  suggestion as the intent's prompt, the candidate's ``steps`` otherwise) are the intent turn's steps. This
  is what the simulator can measure; it needs the embedded simulator's scripts (``--model sim``).

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
from speculate.sim.scenario import Candidate, Scenario, Step, Turn
from speculate.sim.script import same_prompt

LOGNORMAL_MEDIAN_S = 5.0
LOGNORMAL_SIGMA = 0.9
LOGNORMAL_CAP_S = 60.0
TYPING_CHARS_PER_S = 5.0
ENTER_S = 0.3
TAB_ACCEPT_S = 0.2
CYCLE_S = 0.15  # top-K: one more key press to bring the next candidate into the ghost text (an assumption)


class ThinkTime(Protocol):
    """A think-time distribution; ``label`` names it in results ("lognormal", "fixed:2", ...)."""

    @property
    def label(self) -> str: ...  # read-only: the distributions are frozen dataclasses

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


@dataclass(frozen=True)
class RecordedThink:
    """The think time each turn recorded (imported sessions, :func:`recorded_thinks`); a turn without one
    draws from ``fallback``."""

    fallback: ThinkTime = LogNormalThink()
    label: str = "recorded"

    def draw(self, rng: random.Random) -> float:
        return self.fallback.draw(rng)


def recorded_think_s(pause_s: float, prompt: str, *, tab: bool) -> float:
    """Think time from a recorded pause (end of answer to prompt): the pause less the time entering the
    prompt takes as the user entered it (Tab or typing), capped like the log-normal (a longer pause is a
    break, not thinking)."""
    return min(LOGNORMAL_CAP_S, max(0.0, pause_s - (TAB_ACCEPT_S if tab else typing_s(prompt))))


def recorded_thinks(scenario: Scenario) -> list[float | None]:
    """Each turn's recorded think time (None where the scenario recorded no pause; always None for turn 0).
    A turn was entered with Tab when its prompt is the previous turn's suggestion, which is how an import
    writes a prompt the user took from Claude Code's suggestion."""
    out: list[float | None] = [None]
    for prev, turn in zip(scenario.turns, scenario.turns[1:], strict=False):
        tab = any(c.text == turn.prompt and c.weight > 0 for c in prev.options)
        out.append(None if turn.pause_s is None else recorded_think_s(turn.pause_s, turn.prompt, tab=tab))
    return out


@dataclass(frozen=True)
class LogNormalFit:
    mu: float  # of log seconds (maximum likelihood)
    sigma: float
    n: int  # think times fitted
    left_out: int  # zero think times (no log): prompts entered as soon as the answer ended

    @property
    def median_s(self) -> float:
        return math.exp(self.mu)

    def think(self) -> LogNormalThink:
        return LogNormalThink(
            self.median_s,
            self.sigma,
            label=f"lognormal-fit(mu={self.mu:.3f},"
            f"sigma={self.sigma:.3f},median={self.median_s:.3g}s,n={self.n})",
        )


def fit_lognormal(samples: Sequence[float]) -> LogNormalFit:
    """Maximum-likelihood log-normal of positive think times (seconds)."""
    logs = [math.log(x) for x in samples if x > 0]
    if len(logs) < 2:
        raise ValueError(f"--think-time fit: {len(logs)} positive think time(s); at least 2 are needed")
    mu = sum(logs) / len(logs)
    sigma = math.sqrt(sum((x - mu) ** 2 for x in logs) / len(logs))
    return LogNormalFit(mu, sigma, len(logs), len(samples) - len(logs))


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


ACCEPT_RULES = ("exact", "normalized", "outcome")
DEFAULT_ACCEPT_RULE = "outcome"
_TRAILING = ".!?;:,… \t\n"


def normalize_text(text: str) -> str:
    """Case folded, whitespace collapsed, trailing punctuation dropped (the ``normalized`` rule)."""
    return " ".join(text.casefold().split()).rstrip(_TRAILING)


def scripted_steps(cand: Candidate, intent: Turn) -> tuple[Step, ...] | None:
    """What the simulator runs for a suggestion the user sends in place of ``intent``'s prompt: the intent
    turn's steps when it reads the suggestion as that prompt, else the candidate's own (None: it has none,
    and the simulator would answer with its fallback)."""
    if cand.text is not None and same_prompt(intent.prompt, cand.text, None):
        return intent.steps
    return cand.steps


def accepts(rule: str, suggestion: str, intent: Turn, *, candidate: Candidate | None = None) -> bool:
    """Whether the user takes ``suggestion`` when they mean to send ``intent``'s prompt, under ``rule``.
    ``candidate``: the scenario's candidate the suggestion came from (``outcome`` reads its steps; without
    one, only a suggestion the simulator reads as the intent's prompt is taken)."""
    if rule == "exact":
        return suggestion == intent.prompt
    if rule == "normalized":
        return normalize_text(suggestion) == normalize_text(intent.prompt)
    if rule == "outcome":
        cand = candidate if candidate is not None and candidate.text == suggestion else Candidate(suggestion)
        return scripted_steps(cand, intent) == intent.steps
    raise ValueError(f"--accept-rule {rule!r}: choose from {', '.join(ACCEPT_RULES)}")


def chosen_rank(rule: str, shown: list[str], intent: Turn, offered: tuple[Candidate, ...] = ()) -> int | None:
    """The first of the ``shown`` candidates the user takes under ``rule`` (None: they type the intent);
    ``offered`` are the previous turn's scripted candidates, for the ``outcome`` rule."""
    by_text = {c.text: c for c in offered if c.text is not None}
    for rank, text in enumerate(shown):
        if accepts(rule, text, intent, candidate=by_text.get(text)):
            return rank
    return None


def typing_s(text: str, chars_per_s: float = TYPING_CHARS_PER_S) -> float:
    return len(text) / chars_per_s + ENTER_S


@dataclass(frozen=True)
class PlannedTurn:
    """What the user will do before turn ``index``: think, then enter ``text`` (the scenario's prompt)."""

    index: int
    text: str
    think_s: float  # user seconds (the harness multiplies by the time scale)
    scripted_suggestion: str | None  # the suggestion the simulator draws before this turn (same seed)


def plan_turns(
    prompts: Sequence[str],
    suggestions: Sequence[str | None],
    *,
    think: ThinkTime,
    seed: int,
    scenario: str,
    rep: int,
    recorded: Sequence[float | None] = (),
) -> list[PlannedTurn]:
    """The prompt sequence both arms of a pair send, with think times.

    ``suggestions[i]`` is the suggestion drawn after turn ``i``; the user accepts it when it equals the
    next prompt. Think times come from a private RNG per (seed, scenario, rep), so the arms draw the same;
    under :class:`RecordedThink` a turn's ``recorded`` think time, where it has one.
    """
    think_rng = rng_for(seed, scenario, rep, "think")
    out = []
    for i, prompt in enumerate(prompts):
        drawn = think.draw(think_rng) if i > 0 else 0.0  # nothing to speculate before turn 0
        own = recorded[i] if isinstance(think, RecordedThink) and i < len(recorded) else None
        out.append(
            PlannedTurn(i, prompt, drawn if own is None else own, suggestions[i - 1] if i > 0 else None)
        )
    return out
