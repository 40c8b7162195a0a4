"""The acceptance sweep's forced draw: the suggestion is the next intent with the forced probability,
otherwise a wrong suggestion with work behind it; the simulator serves exactly what the bench expects."""

from __future__ import annotations

import pytest

from speculate.sim import parse_scenario
from speculate.sim.draw import draw_suggestion, forced_draw
from speculate.sim.script import Script
from tests.sim.test_candidates import body

SCN = """\
name: forced
turns:
  - prompt: "look at a"
    steps:
      - text: "a holds alpha."
    suggestions:
      - {text: "change alpha to gamma", weight: 3}
      - text: "delete a"
        steps:
          - text: "Deleted (not really)."
  - prompt: "change alpha to gamma"
    steps:
      - text: "Changed."
  - prompt: "now explain b"
    steps:
      - text: "b is beta."
  - prompt: "and c"
    steps:
      - text: "c is gamma."
"""


def test_the_extremes_always_and_never_offer_the_intent() -> None:
    s = parse_scenario(SCN)
    intents = [t.prompt for t in s.turns[1:]]
    for seed in range(50):
        assert [draw_suggestion(s, i, seed=seed, hit_rate=1.0).text for i in range(3)] == intents
        misses = [forced_draw(s, i, seed=seed, hit_rate=0.0) for i in range(3)]
        assert [c.text for c, _ in misses] == ["delete a", "and c", "now explain b"]
        # the turn's own wrong candidate; a later turn's prompt; else its own prompt (unscripted)
        assert [k for _, k in misses] == ["candidate", "later_turn", "unscripted"]
    # After the last turn there is no intent to hit: the scenario's own draw.
    assert draw_suggestion(s, 3, seed=0, hit_rate=1.0) == draw_suggestion(s, 3, seed=0)


def test_the_hit_share_follows_the_forced_rate_and_is_independent_of_the_natural_draw() -> None:
    s = parse_scenario(SCN)
    hits = sum(forced_draw(s, 1, seed=seed, hit_rate=0.3)[1] is None for seed in range(1000))
    assert 0.25 < hits / 1000 < 0.35
    # A higher rate only turns misses into hits: the same seeds hit, and more.
    low = {seed for seed in range(300) if forced_draw(s, 1, seed=seed, hit_rate=0.3)[1] is None}
    high = {seed for seed in range(300) if forced_draw(s, 1, seed=seed, hit_rate=0.6)[1] is None}
    assert low < high
    with pytest.raises(ValueError, match=r"hit rate 1\.5"):
        forced_draw(s, 0, seed=0, hit_rate=1.5)


def test_the_simulator_serves_the_forced_draw_and_answers_the_wrong_fork_with_work() -> None:
    s = parse_scenario(SCN)
    for seed in range(20):
        script = Script([s], seed=seed, hit_rate=0.5)
        for i in range(3):
            want = draw_suggestion(s, i, seed=seed, hit_rate=0.5).text
            got = script.reply(body(*[t.prompt for t in s.turns[: i + 1]], suggest=True)).content
            assert [b["text"] for b in got] == [want]
    # A fork on the "later turn" miss is answered with that turn's steps, not the fallback.
    script = Script([s], seed=0, hit_rate=0.0)
    fork = script.reply(body("look at a", "change alpha to gamma", "and c"))
    assert fork.content[0]["text"] == "c is gamma."
    with pytest.raises(ValueError, match="hit rate 2"):
        Script([s], hit_rate=2.0)
