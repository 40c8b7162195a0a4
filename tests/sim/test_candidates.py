"""Weighted suggestion candidates: parsed with file:line errors, drawn per seed, the same draw in the
simulator and in the bench, and a taken non-intent candidate runs its own steps."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from speculate.prompts import SUGGESTION_INSTRUCTION, system_prompt
from speculate.sim import ScenarioError, load_scenario, parse_scenario
from speculate.sim.draw import draw_suggestion
from speculate.sim.script import Script

SCN = """\
name: cands
turns:
  - prompt: "look at a"
    steps:
      - text: "a holds alpha."
    suggestions:
      - {text: "change alpha to gamma", weight: 3}
      - text: "delete a"
        weight: 1
        steps:
          - text: "Deleted (not really)."
      - {text: null, weight: 1}
  - prompt: "change alpha to gamma"
    steps:
      - text: "Changed."
"""


def body(*prompts: str, suggest: bool = False) -> dict:
    msgs: list[dict] = []
    for i, p in enumerate(prompts):
        msgs.append({"role": "user", "content": p})
        if i < len(prompts) - 1:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": "x"}]})
    if suggest:
        msgs += [
            {"role": "assistant", "content": [{"type": "text", "text": "a holds alpha."}]},
            {"role": "user", "content": SUGGESTION_INSTRUCTION},
        ]
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 100,
        "system": system_prompt(Path("/p")),
        "messages": msgs,
    }


def test_candidates_parse_and_the_heaviest_is_the_turns_suggestion() -> None:
    s = parse_scenario(SCN)
    t = s.turns[0]
    assert [c.text for c in t.options] == ["change alpha to gamma", "delete a", None]
    assert [c.weight for c in t.options] == [3.0, 1.0, 1.0]
    assert t.suggestion == "change alpha to gamma" and t.options[1].steps is not None
    # The old format is one candidate.
    assert [c.text for c in s.turns[1].options] == [None]


def test_draws_follow_the_weights_and_the_simulator_serves_the_same_draw() -> None:
    s = parse_scenario(SCN)
    draws = Counter(draw_suggestion(s, 0, seed=seed).text for seed in range(500))
    assert set(draws) == {"change alpha to gamma", "delete a", None}
    assert 0.5 < draws["change alpha to gamma"] / 500 < 0.7  # weight 3 of 5
    script = Script([s], seed=7)
    want = draw_suggestion(s, 0, seed=7).text
    got = script.reply(body("look at a", suggest=True)).content
    assert [b["text"] for b in got] == ([] if want is None else [want])


def test_a_taken_candidate_that_is_not_the_intent_runs_its_steps() -> None:
    s = parse_scenario(SCN)
    reply = Script([s]).reply(body("look at a", "delete a"))
    assert reply.content[0]["text"] == "Deleted (not really)."


@pytest.mark.parametrize(
    ("extra", "line", "reason"),
    [
        ("    suggestions:\n      - {text: 'go on'}\n", 6, "steps is required"),
        ("    suggestions:\n      - {text: 'b', weight: -1}\n", 6, "weight must be a number >= 0"),
        ("    suggestions:\n      - {text: 'b', weight: 0}\n", 6, "weight 0 is only for a wrong suggestion"),
        ("    suggestions:\n      - {text: 'c', weight: 0, steps: [{text: x}]}\n", 6, "every weight is 0"),
        ("    suggestions: []\n", 5, "non-empty list"),
        ("    suggestion: b\n    suggestions:\n      - {text: b}\n", 5, "not both"),
        ("    suggestions:\n      - {text: b}\n      - {text: b}\n", 6, "same text"),
    ],
)
def test_malformed_candidates_name_file_and_line(tmp_path: Path, extra: str, line: int, reason: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: x\nturns:\n  - prompt: a\n    steps: [{text: hi}]\n"
        + extra
        + "  - prompt: b\n    steps: [{text: ok}]\n"
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert (info.value.line, reason in info.value.reason) == (line, True), str(info.value)


def test_a_weight_0_candidate_is_never_drawn_naturally_but_is_a_forced_miss() -> None:
    """Writing a wrong candidate for the acceptance sweep must not change the natural draws (kept runs stay
    reproducible): weight 0 keeps it out of them."""
    from speculate.sim.draw import forced_draw

    plain = parse_scenario(SCN.replace("      - {text: null, weight: 1}\n", ""))
    extra = parse_scenario(
        SCN.replace(
            "      - {text: null, weight: 1}\n", '      - {text: "rename a", weight: 0, steps: [{text: x}]}\n'
        )
    )
    one = parse_scenario(
        SCN.replace("      - {text: null, weight: 1}\n", "").replace(
            '      - text: "delete a"\n        weight: 1', '      - text: "delete a"\n        weight: 0'
        )
    )
    assert [draw_suggestion(one, 0, seed=s).text for s in range(300)] == ["change alpha to gamma"] * 300
    assert {forced_draw(one, 0, seed=s, hit_rate=0.0) for s in range(20)} == {
        (one.turns[0].options[1], "candidate")
    }
    assert [draw_suggestion(plain, 0, seed=s).text for s in range(300)] == [
        draw_suggestion(extra, 0, seed=s).text for s in range(300)
    ]
