"""How the simulator reads compaction: the summary request, and a conversation continued from a summary."""

from __future__ import annotations

from speculate.compaction import COMPACT_INSTRUCTION, CONTINUATION
from speculate.sim.clients import read_conversation
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.script import Script

SYSTEM = "Working directory: /p"
SCENARIO = parse_scenario("""
name: two
turns:
  - prompt: "look at {root}/a.txt"
    steps: [{text: "one"}]
  - prompt: "and b"
    steps: [{text: "two"}]
""")


def body(*messages: dict) -> dict:
    return {"model": "claude-sonnet-4-6", "system": SYSTEM, "messages": list(messages)}


def u(*texts: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def a(text: str) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def test_a_summary_request_is_answered_with_the_prompts_and_the_continuation_resumes_the_scenario() -> None:
    script = Script([SCENARIO])
    req = body(u("look at /p/a.txt"), a("one"), u(COMPACT_INSTRUCTION))
    conv = read_conversation(req)
    assert conv.compaction_mode and not conv.suggestion_mode and conv.prompts == ("look at {path}/a.txt",)
    summary = script.reply(req).content[0]["text"]
    assert "look at {path}/a.txt" in summary and "<sim-prompts>" in summary
    # The session goes on from one message: the continuation block, then the next prompt.
    cont = body(u(CONTINUATION.format(summary=summary), "and b"))
    assert read_conversation(cont).prompts == ("look at {path}/a.txt", "and b")
    assert script.reply(cont).content == [{"type": "text", "text": "two"}]


def test_the_instruction_joining_an_interrupted_turn_is_still_a_summary_request() -> None:
    req = body(u("look at /p/a.txt"), a("one"), u("and b", COMPACT_INSTRUCTION))
    conv = read_conversation(req)
    assert conv.compaction_mode and conv.prompts == ("look at {path}/a.txt", "and b")


def test_a_prompt_that_merely_mentions_a_summary_is_a_prompt() -> None:
    conv = read_conversation(body(u("write a summary of the conversation so far")))
    assert not conv.compaction_mode and conv.prompts == ("write a summary of the conversation so far",)
