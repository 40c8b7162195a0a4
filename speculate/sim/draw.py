"""Which suggestion the simulated model offers after a turn: a pure function of (seed, scenario, turn, hit
rate), so the simulator and the benchmark's simulated user draw the same candidate without talking.

Naturally the draw follows the scenario's candidate weights, so the acceptance rate is the authors' choice.
A forced ``hit_rate`` (the benchmark's acceptance sweep) instead makes the suggestion the next turn's intent
with that probability, and otherwise a *wrong* suggestion with work behind it, so that a miss costs what a
real wrong prediction costs (a fork that runs, then is thrown away):

1. one of the turn's own wrong candidates, by weight (its ``steps`` are what the fork runs); a candidate of
   weight 0 is never drawn naturally and exists for this case;
2. else the prompt of a later turn (the model predicted a step too early; the script answers the fork
   with that turn's steps);
3. else the turn's own prompt again, which the script does not answer: a cheap miss (fallback text).
"""

from __future__ import annotations

from typing import Literal

from speculate.sim.latency import rng_for
from speculate.sim.scenario import Candidate, Scenario

MissKind = Literal["candidate", "later_turn", "unscripted"]


def draw_suggestion(scenario: Scenario, turn: int, *, seed: int, hit_rate: float | None = None) -> Candidate:
    """The candidate the model offers after ``turn`` for this seed (the simulator and the bench agree)."""
    return draw(scenario, turn, seed=seed, hit_rate=hit_rate)[0]


def draw(
    scenario: Scenario, turn: int, *, seed: int, hit_rate: float | None = None
) -> tuple[Candidate, MissKind | None]:
    """The candidate offered after ``turn`` and, under a forced ``hit_rate``, the kind of miss it is (None
    for a hit, and always None for the natural draw by the scenario's weights)."""
    if hit_rate is not None and turn + 1 < len(scenario.turns):
        return forced_draw(scenario, turn, seed=seed, hit_rate=hit_rate)
    options = [c for c in scenario.turns[turn].options if c.weight > 0]  # weight 0: forced misses only
    if len(options) == 1:
        return options[0], None
    rng = rng_for("suggestion", seed, scenario.name, turn)
    return rng.choices(options, weights=[c.weight for c in options])[0], None


def forced_draw(
    scenario: Scenario, turn: int, *, seed: int, hit_rate: float
) -> tuple[Candidate, MissKind | None]:
    """The suggestion after ``turn`` when it is the intent with probability ``hit_rate``; and, for a miss,
    which kind of wrong suggestion it is (None for a hit)."""
    if not 0.0 <= hit_rate <= 1.0:
        raise ValueError(f"hit rate {hit_rate:g}: must be between 0 and 1")
    intent = scenario.turns[turn + 1].prompt
    options = scenario.turns[turn].options
    rng = rng_for("hit", seed, scenario.name, turn)
    if rng.random() < hit_rate:
        return next((c for c in options if c.text == intent), Candidate(intent)), None
    wrong = [c for c in options if c.text is not None and c.text != intent]
    if wrong:  # by weight; candidates of weight 0 (written for the sweep) only when no other is wrong
        drawn = [c for c in wrong if c.weight > 0] or wrong
        return rng.choices(drawn, weights=[c.weight or 1.0 for c in drawn])[0], "candidate"
    if turn + 2 < len(scenario.turns):
        return Candidate(scenario.turns[turn + 2].prompt), "later_turn"
    return Candidate(scenario.turns[turn].prompt), "unscripted"


def draw_candidates(
    scenario: Scenario, turn: int, *, seed: int, k: int, hit_rate: float | None = None
) -> list[Candidate]:
    """Top-K: the first is :func:`draw`'s (so k=1 offers what it always did), then the turn's other candidates
    by weight, drawn without replacement from this seed (the intent among them, if the turn has it; weight-0
    candidates only under a forced rate, where they stand for wrong guesses). At most ``k``, all with text."""
    first = draw(scenario, turn, seed=seed, hit_rate=hit_rate)[0]
    if first.text is None or k <= 1:
        return [] if first.text is None else [first]
    forced = hit_rate is not None and turn + 1 < len(scenario.turns)
    rest = [
        c
        for c in scenario.turns[turn].options
        if c.text is not None and c.text != first.text and (c.weight > 0 or forced)
    ]
    rng = rng_for("candidates", seed, scenario.name, turn)
    out = [first]
    while rest and len(out) < k:
        pick = rng.choices(rest, weights=[c.weight or 0.5 for c in rest])[0]
        rest.remove(pick)
        out.append(pick)
    return out
