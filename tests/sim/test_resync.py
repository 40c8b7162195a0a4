"""Off-script prompts: an explained fallback, and the script picks up again at the next scripted prompt."""

from __future__ import annotations

from typing import Any

from speculate.prompts import SUGGESTION_INSTRUCTION
from speculate.sim import parse_scenario
from speculate.sim.script import FALLBACK_PREFIX, Script

SCRIPT = """
name: three
description: three scripted turns
turns:
  - prompt: "one"
    steps: [{text: "answer one"}]
    suggestion: "two"
  - prompt: "two"
    steps: [{text: "answer two"}]
    suggestion: "three"
  - prompt: "three"
    steps: [{text: "answer three"}]
"""


def body(*prompts: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for p in prompts:
        messages += [{"role": "user", "content": p}, {"role": "assistant", "content": "(answer)"}]
    return {"system": "Working directory: /p", "messages": messages[:-1]}


def text(reply: Any) -> str:
    return reply.content[0]["text"] if reply.content else ""


def test_a_detour_gets_an_explained_fallback_and_the_script_resynchronises() -> None:
    script = Script([parse_scenario(SCRIPT)])
    detour = script.reply(body("one", "what does cart.py do?"))
    assert detour.is_fallback and text(detour).startswith(FALLBACK_PREFIX)
    assert "'what does cart.py do?' is not in scenario 'three'" in text(detour)
    assert "the next scripted prompt is 'two'" in text(detour) and "--model anthropic" in text(detour)
    assert text(script.reply(body("one", "what does cart.py do?", "two"))) == "answer two"
    # Two detours, then a later turn: still on script (skipping "two").
    assert text(script.reply(body("one", "x", "y", "three"))) == "answer three"
    # A detour before the scenario's first prompt does not stop it from starting.
    assert text(script.reply(body("hello?", "one"))) == "answer one"


def test_no_suggestion_off_script() -> None:
    script = Script([parse_scenario(SCRIPT)])
    suggest = body("one", "what does cart.py do?")
    suggest["messages"] += [
        {"role": "assistant", "content": "(answer)"},
        {"role": "user", "content": SUGGESTION_INSTRUCTION},
    ]
    assert script.reply(suggest).content == []
