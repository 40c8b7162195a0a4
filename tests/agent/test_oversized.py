"""A session survives oversized input: a hook printing 10 MB is cut to a budget with a note, a turn whose
requests outgrow the context window compacts and retries once (reactive compaction), and a turn that still
cannot fit is taken back out of the conversation, so the next prompt works (never a poisoned session)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from speculate.models.anthropic import AnthropicModel
from speculate.models.profiles import PROFILES
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.tools.budget import HOOK_OUTPUT_BUDGET
from speculate.types import text_of

MODEL = "claude-sonnet-4-6"
SCENARIO = """
name: oversized
turns:
  - prompt: "read the big file"
    steps:
      - tools:
          - Read: {file_path: "{root}/big.txt"}
      - text: "It is big."
    suggestion: null
  - prompt: "read a"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a says alpha."
    suggestion: null
"""
PARTS = """
name: parts
turns:
  - prompt: "read part 1"
    steps:
      - tools:
          - Read: {file_path: "{root}/part1.txt"}
      - text: "Part 1 read."
    suggestion: null
  - prompt: "read part 2"
    steps:
      - tools:
          - Read: {file_path: "{root}/part2.txt"}
      - text: "Part 2 read."
    suggestion: null
  - prompt: "read part 3"
    steps:
      - tools:
          - Read: {file_path: "{root}/part3.txt"}
      - text: "Part 3 read."
    suggestion: null
"""
# ~20,000 tokens for the simulator (ceil(chars / 4)): more than the window below, less than a Read's limits.
BIG = "".join(
    f"line {i}: words words words words words words words words words words words\n" for i in range(1000)
)
PART = BIG[:20_000]  # ~5,000 tokens: two fit under the window below, the third does not


@asynccontextmanager
async def session(
    tmp: Path, *, window: int = 200_000, hooks: dict[str, Any] | None = None, **cfg: Any
) -> AsyncIterator[Session]:
    root = tmp / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "big.txt").write_text(BIG)
    for i in (1, 2, 3):
        (root / f"part{i}.txt").write_text(PART)
    if hooks:
        (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    profiles = tuple(replace(p, context_window=window) if p.name == MODEL else p for p in PROFILES)
    with SimServer(
        [parse_scenario(SCENARIO), parse_scenario(PARTS)], time_scale=0.01, profiles=profiles
    ) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            cfg.setdefault("compact_margin", min(13_000, window // 4))
            config = SessionConfig(
                project=root, model=model, model_name=MODEL, speculate=False, context_window=window, **cfg
            )
            async with open_session(config) as s:
                yield s


def test_a_hook_printing_10_mb_is_cut_to_its_budget_and_every_turn_still_works(tmp_path: Path) -> None:
    hook = {"type": "command", "command": "python3 -c \"import sys; sys.stdout.write('x' * 10_000_000)\""}

    async def main() -> None:
        async with session(tmp_path, hooks={"UserPromptSubmit": [{"hooks": [hook]}]}) as s:
            first = await s.submit("read a")
            assert not first.error, first.error
            sent = json.dumps(s.messages[0])
            assert len(sent) < HOOK_OUTPUT_BUDGET + 2_000
            assert "[hook output cut to its first 10,000 of " in sent and "not sent to the model]" in sent
            second = await s.submit("read a")
            assert not second.error, second.error

    trio.run(main)


def test_a_turn_over_the_window_compacts_and_retries_once(tmp_path: Path) -> None:
    """Two turns stay under the automatic threshold; the third's tool result takes the request over the
    window: the conversation is compacted (the summary request seeing it cut down) and the request retried."""

    async def main() -> None:
        async with session(tmp_path, window=16_000, compact_margin=1_000) as s:
            for i in (1, 2):
                warm = await s.submit(f"read part {i}")
                assert not warm.error and not warm.note, (warm.error, warm.note)
            out = await s.submit("read part 3")
            assert not out.error, out.error
            assert out.text == "Part 3 read."
            assert "over the context window: conversation compacted" in out.note and "retried" in out.note
            (rec,) = s.compactor.records
            assert rec.ok and rec.trigger == "reactive"
            # The summary request saw the big result cut down; the session goes on from the summary.
            assert s.messages[0]["content"][0]["text"].startswith("This session is being continued")
            after = await s.submit("read a")
            assert not after.error and after.text, after

    trio.run(main)


def test_a_turn_that_cannot_fit_is_taken_back_out_and_the_next_prompt_works(tmp_path: Path) -> None:
    async def main() -> None:
        async with session(tmp_path, window=16_000, auto_compact=False) as s:
            await s.submit("read a")
            kept = [text_of(m) for m in s.messages]
            out = await s.submit("read the big file")
            assert "prompt is too long" in out.error and "taken back out of the conversation" in out.error
            assert [text_of(m) for m in s.messages] == kept
            after = await s.submit("read a")
            assert not after.error, after.error

    trio.run(main)
