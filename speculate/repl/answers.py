"""Answers to the REPL's one-off questions (permission prompts): a choice or a unique prefix of one."""

from __future__ import annotations

from collections.abc import Sequence

from speculate.errors import SpeculateError


class BadAnswer(SpeculateError, ValueError):
    """An answer that picks no single choice; the message names it and says what is expected."""


def choose(raw: str, choices: Sequence[str]) -> str:
    answer = raw.strip().lower()
    if answer in choices:
        return answer
    hits = [c for c in choices if c.startswith(answer)] if answer else []
    if len(hits) == 1:
        return hits[0]
    expected = ", ".join(choices[:-1]) + f" or {choices[-1]}"
    what = (
        f"{raw.strip()!r} is ambiguous"
        if len(hits) > 1
        else (f"{raw.strip()!r} is not an answer" if answer else "no answer")
    )
    raise BadAnswer(f"{what}: type {expected} (or the first letter), then Enter")
