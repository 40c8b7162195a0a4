"""Suggestion-filter microbenchmarks (pytest-benchmark): the cost of vetting one predicted prompt.

Run separately from the tests, saving JSON::

    .venv/bin/pytest bench/micro/bench_filters.py --benchmark-json=results/micro-filters.json

The filters run once per assistant turn, on the critical path between the suggestion response and the
fork's start, so anything near a millisecond would matter; they should be microseconds.
"""

from __future__ import annotations

from typing import Any

from speculate.speculation.filters import check

KEPT = [
    "fix it and add a regression test",
    "run the tests",
    "yes",
    "commit this with a short message",
    "now add a --low-stock option to the CLI",
]
REJECTED = [
    "Great, that looks good!",  # evaluative
    "I'll run the tests now",  # assistant voice
    "- run the tests\n- commit",  # formatting
    "The user might want to run the tests next",  # meta
    "Error: rate limit exceeded",  # error text
    "please go ahead and refactor every module in the package so that it uses the new helpers everywhere",
    "done",
]


def _all(samples: list[str]) -> list[Any]:
    return [check(s) for s in samples]


def test_filters_kept(benchmark: Any) -> None:
    verdicts = benchmark(_all, KEPT)
    assert all(v.ok for v in verdicts)


def test_filters_rejected(benchmark: Any) -> None:
    verdicts = benchmark(_all, REJECTED)
    assert not any(v.ok for v in verdicts)
    assert all(v.reason for v in verdicts)


def test_filters_long_input(benchmark: Any) -> None:
    text = "run the tests " * 400  # a runaway response: rejected, and must stay cheap
    verdict = benchmark(check, text)
    assert not verdict.ok
