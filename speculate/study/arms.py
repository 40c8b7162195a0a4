"""The study's arms and their seeded assignment.

What a person sees before deciding is the same in ``speculative`` and ``suggest``: the model's suggestion as
ghost text, taken with Tab. Only what Tab gives differs, and only after the decision: the speculation's answer
(the fork started when the suggestion was shown) or a normal turn for that prompt. Their contrast is what the
fork buys, with the person's behaviour unchanged by the arm. ``plain`` (no ghost text) is what a person without
the feature sees; it changes their behaviour (they must type), so it is off unless asked for.

Assignment is blocked randomization: the turns of a session are taken in blocks of ``BLOCK_PER_ARM`` turns
per arm (four turns with the two default arms), each block a random permutation drawn from
``random.Random(seed)`` in turn order, so the sequence is a function of the seed alone and the arms of a
person's turns stay balanced (within a session the counts never differ by more than ``BLOCK_PER_ARM``; a
person's sessions each add at most that much). Simple randomization (each turn drawn independently) let
one person's turns fall mostly in one arm, confounding the arm with the person's habits in a small study.
The arm is hidden until the prompt is sent, so a person who guessed the block's remaining arms could not
act on it before deciding.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from speculate.session import SessionConfig

Arm = Literal["speculative", "suggest", "plain"]
ARMS: tuple[Arm, ...] = get_args(Arm)
DEFAULT_ARMS: tuple[Arm, ...] = ("speculative", "suggest")
ARM_HELP = {
    "speculative": "ghost text; the fork runs the suggestion at once, and Tab+Enter takes its answer",
    "suggest": "ghost text; no fork: Tab+Enter runs the suggested prompt as a normal turn",
    "plain": "no ghost text at all (changes what the person does: they type every prompt)",
}


def parse_arms(text: str) -> tuple[Arm, ...]:
    """``speculative,suggest[,plain]``: two or more distinct arms; ValueError naming the bad input."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in names if a not in ARMS]
    if bad:
        raise ValueError(f"--study-arms {text!r}: unknown arm {bad[0]!r}; choose from {', '.join(ARMS)}")
    if len(set(names)) != len(names) or len(names) < 2:
        raise ValueError(f"--study-arms {text!r}: name two or more different arms (of {', '.join(ARMS)})")
    return tuple(
        a for a in ARMS if a in names
    )  # canonical order: the draw does not depend on how they were typed


BLOCK_PER_ARM = 2  # turns of each arm in a block: a block of 4 with two arms, 6 with three


class Assigner:
    """The arm of each turn in order: ``draw()`` returns the next one; ``draws`` counts them. Permuted blocks
    (module docstring): each block holds every arm ``BLOCK_PER_ARM`` times, shuffled."""

    def __init__(self, *, seed: int, arms: Sequence[Arm] = DEFAULT_ARMS) -> None:
        self.seed = seed
        self.arms = tuple(arms)
        self._rng = random.Random(seed)
        self._block: list[Arm] = []
        self.draws = 0

    def draw(self) -> Arm:
        if not self._block:
            block = [a for a in self.arms for _ in range(BLOCK_PER_ARM)]
            self._rng.shuffle(block)
            self._block = block[::-1]  # popped from the end: the shuffled order, first to last
        self.draws += 1
        return self._block.pop()


def sequence(seed: int, n: int, arms: Sequence[Arm] = DEFAULT_ARMS) -> list[Arm]:
    """The first ``n`` arms a study seeded with ``seed`` assigns (what its log must show)."""
    a = Assigner(seed=seed, arms=arms)
    return [a.draw() for _ in range(n)]


def apply(cfg: SessionConfig, arm: Arm) -> None:
    """Switch the session for the next turn's cycle: ``speculate`` (suggest at all) and ``fork``."""
    cfg.speculate = arm != "plain"
    cfg.fork = arm == "speculative"
