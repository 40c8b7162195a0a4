"""Checked miss forks: a fork of a wrong suggestion runs real tools too, so its tool results are checked
against the candidate's scripted steps as a main turn's are (bench/expect.py).

The fork is thrown away when the user types their own prompt, so its messages never reach the session. The
harness therefore hands the session :class:`ForkWatch`, the model passed through unchanged, which keeps the
messages of the latest request whose prompt is the watched suggestion: every tool result the fork had when
it was cut (the last request of a finished fork carries all of them).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from bench.expect import check_turn
from speculate.models.base import CacheKey, Model, StreamUpdate
from speculate.prompts import SUGGESTION_INSTRUCTION
from speculate.sim.draw import MissKind
from speculate.sim.scenario import Candidate, Scenario, Step
from speculate.types import Message


def _prompt_text(m: Message) -> str | None:
    """A user message's own text (None for one that only carries tool results)."""
    if m.get("role") != "user":
        return None
    c = m.get("content")
    if isinstance(c, str):
        return c
    texts = [b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text"]
    return "".join(texts) if texts else None


class ForkWatch:
    """A model wrapper that remembers what a fork of ``watch(prompt)`` last sent."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self._prompt: str | None = None
        self.seen: list[Message] = []

    def watch(self, prompt: str | None) -> None:
        """From now on keep the fork of ``prompt`` (None: nothing)."""
        self._prompt, self.seen = prompt, []

    def stream(
        self, key: CacheKey, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncGenerator[StreamUpdate, None]:
        if self._prompt is not None:
            prompts = [(i, t) for i, m in enumerate(messages) if (t := _prompt_text(m)) is not None]
            # The fork's own request: its latest prompt is the suggestion (a suggestion request made on the
            # fork's messages ends with the suggestion instruction instead, and is not the fork's).
            if (
                prompts
                and prompts[-1][1] == self._prompt
                and not prompts[-1][1].startswith(SUGGESTION_INSTRUCTION)
            ):
                self.seen = copy.deepcopy(list(messages[prompts[-1][0] + 1 :]))
        return self._pass(key, messages, max_tokens)

    async def _pass(
        self, key: CacheKey, messages: Sequence[Message], max_tokens: int | None
    ) -> AsyncGenerator[StreamUpdate, None]:
        async with aclosing(self.inner.stream(key, messages, max_tokens=max_tokens)) as updates:
            async for u in updates:
                yield u


def miss_steps(scenario: Scenario, turn: int, offered: Candidate, kind: MissKind | None) -> tuple[Step, ...]:
    """What the script answers a fork of ``offered`` (a wrong suggestion after ``turn``) with: its own steps,
    or for a later turn's prompt that turn's steps; none for an unscripted one (the fork ends at once)."""
    if offered.steps:
        return tuple(offered.steps)
    if kind == "later_turn":
        return next((t.steps for t in scenario.turns[turn + 1 :] if t.prompt == offered.text), ())
    return ()


def check_fork(steps: tuple[Step, ...], messages: list[Message]) -> tuple[list[str], int]:
    """Unmet expectations of a fork's tool results (named as the fork's), and how many results were checked."""
    checked = 0
    k = -1
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        k += 1
        if k < len(steps) and i + 1 < len(messages):
            uses = [b for b in m.get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]
            checked += sum(steps[k].expect_at(j) is not None for j in range(len(uses)))
    return [f"miss fork: {p}" for p in check_turn(steps, messages)], checked


Offers = list[tuple[Candidate, MissKind | None]]  # the suggestion offered after each turn, and its miss kind


def wrong_suggestion(scenario: Scenario, offers: Offers, turn: int) -> str | None:
    """The suggestion offered after ``turn`` when it is not the next prompt (its fork is a miss)."""
    if turn + 1 >= len(scenario.turns):
        return None
    text = offers[turn][0].text
    return text if text is not None and text != scenario.turns[turn + 1].prompt else None


def miss_for(scenario: Scenario, offers: Offers, turn: int) -> tuple[Step, ...]:
    """The steps the miss fork before ``turn`` ran (empty: the suggestion was no miss, or unscripted)."""
    if turn == 0 or wrong_suggestion(scenario, offers, turn - 1) is None:
        return ()
    offered, kind = offers[turn - 1]
    return miss_steps(scenario, turn - 1, offered, kind)
