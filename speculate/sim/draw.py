"""Which suggestion the simulated model offers after a turn: a pure function of (seed, scenario, turn), so
the simulator and the benchmark's simulated user draw the same candidate without talking to each other."""

from __future__ import annotations

import hashlib
import random

from speculate.sim.scenario import Candidate, Scenario


def draw_suggestion(scenario: Scenario, turn: int, *, seed: int) -> Candidate:
    """The candidate the model offers after ``turn`` for this seed (the simulator and the bench agree)."""
    options = scenario.turns[turn].options
    if len(options) == 1:
        return options[0]
    digest = hashlib.sha256(f"suggestion:{seed}:{scenario.name}:{turn}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return rng.choices(options, weights=[c.weight for c in options])[0]
