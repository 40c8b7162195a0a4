"""Billing as the API bills: a fork or a suggestion cut mid-stream is charged its input and the output
streamed before the cut, by the client (the engine's records) and by the simulator (what it streamed)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import trio

from speculate.models.anthropic import AnthropicModel
from speculate.models.base import CacheKey, Done, TextDelta, Usage
from speculate.models.billing import Meter, billed_to
from speculate.prompts import SUGGESTION_INSTRUCTION
from speculate.session import SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.types import Message, user

from .conftest import LONG, SCENARIO, make_project

INPUT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
LONG_SUGGESTION = " ".join(["perhaps you would like me to keep going with the next part of it"] * 8)
CHATTY = f"""
name: billing-chatty-suggestion
files:
  a.txt: "alpha\\n"
turns:
  - prompt: "read a for billing"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/a.txt"}}
      - text: "a.txt holds alpha."
    suggestion: "{LONG_SUGGESTION}"
    suggestion_steps:
      - text: "Going on."
  - prompt: "something else"
    steps:
      - text: "Fine."
    suggestion: null
"""


class Watched:
    """The real model, passed through; it notes the first streamed text of each request whose text starts
    with a given prefix, and the usage of each finished request (by whether it is a suggestion request)."""

    def __init__(self, inner: AnthropicModel, prefix: str) -> None:
        self.inner, self.name, self.prefix = inner, inner.name, prefix
        self.streaming = trio.Event()
        self.finished: list[tuple[bool, Usage]] = []

    async def stream(
        self, key: CacheKey, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncIterator[Any]:
        last = messages[-1]["content"]
        suggestion = isinstance(last, list) and any(
            b.get("type") == "text" and b.get("text", "").startswith(SUGGESTION_INSTRUCTION) for b in last
        )
        async with aclosing(self.inner.stream(key, messages, max_tokens=max_tokens)) as updates:
            async for u in updates:
                if isinstance(u, Done):
                    self.finished.append((suggestion, u.response.usage))
                yield u
                if isinstance(u, TextDelta) and u.text and self.prefix.startswith(u.text[:10]):
                    self.streaming.set()


async def cut_stream_billed(sim: SimServer) -> dict[str, Any]:
    """The simulator's record of the stream the client cut (it notices at its next write)."""
    with trio.fail_after(10):
        while not sim.statistics().cancelled.get("each"):
            await trio.sleep(0.02)
    (cut,) = sim.statistics().cancelled["each"]
    return cut


def test_a_fork_cut_mid_stream_is_billed_its_input_and_the_output_streamed(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.5) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x") as model:
                watched = Watched(model, LONG)
                cfg = SessionConfig(project=root, model=watched, mode="bypassPermissions")  # type: ignore[arg-type]
                async with open_session(cfg, ask=None) as s:
                    for p in ("look at a", "change alpha to gamma", "fetch the docs", "ask the web"):
                        await s.engine.ignore()
                        await s.submit(p)
                    assert await s.wait_suggestion() == "write a long essay"
                    done_before = len(watched.finished)
                    with trio.fail_after(20):
                        await watched.streaming.wait()  # the fork's second request streams its long text
                    await s.engine.ignore()
                    rec = [r for r in s.events.records if r.kind == "speculation"][-1]
                    cut = await cut_stream_billed(sim)
        fork_done = [u for sugg, u in watched.finished[done_before:] if not sugg]
        assert rec.outcome == "aborted" and len(fork_done) == 1  # the Read step finished, the essay did not
        # The record holds the finished request and the cut one: the cut one's input exactly as the
        # simulator planned it, its output as far as it streamed (the client saw at most what went out).
        for k in INPUT:
            assert rec.tokens[k] == getattr(fork_done[0], k) + cut[k], k
        out = rec.tokens["output_tokens"] - fork_done[0].output_tokens
        # Above what the client saw: the events in flight when it hung up (about 6 tokens each; a loaded
        # machine lets a few pile up in the socket), far below the ~600 of the whole text.
        assert 1 < out <= cut["output_tokens"] <= out + 60
        assert rec.cost_usd > 0

    trio.run(main)


def test_a_suggestion_cut_mid_stream_is_recorded_with_its_bill(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")

    async def main() -> None:
        with SimServer([parse_scenario(CHATTY)], time_scale=0.5) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x") as model:
                watched = Watched(model, LONG_SUGGESTION)
                cfg = SessionConfig(project=root, model=watched, mode="bypassPermissions")  # type: ignore[arg-type]
                async with open_session(cfg, ask=None) as s:
                    await s.submit("read a for billing")
                    with trio.fail_after(20):
                        await watched.streaming.wait()  # the suggestion is streaming
                    await s.engine.ignore()
                    cut = await cut_stream_billed(sim)
                    recs = [r for r in s.events.records if r.kind == "suggestion"]
        (rec,) = recs
        assert rec.outcome == "discarded" and rec.reason == "cancelled mid-request"
        for k in INPUT:
            assert rec.tokens[k] == cut[k], k
        assert 1 <= rec.tokens["output_tokens"] <= cut["output_tokens"] and rec.cost_usd > 0

    trio.run(main)


def test_a_finished_or_unscoped_stream_charges_no_meter(tmp_path: Path) -> None:
    async def main() -> None:
        with SimServer([parse_scenario(CHATTY)], time_scale=0.05) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x") as model:
                key = CacheKey.build(model="claude-sonnet-4-6", system="s", tools=[])
                meter = Meter()
                with billed_to(meter):
                    async with aclosing(model.stream(key, [user("read a for billing")])) as st:
                        async for _ in st:
                            pass
                assert meter.cancelled == 0  # finished: its usage is in the response
                with trio.move_on_after(0.001):  # cut before message_start: nothing reported, nothing billed
                    with billed_to(meter):
                        async with aclosing(model.stream(key, [user("read a for billing")])) as st:
                            async for _ in st:
                                pass
                assert meter.cancelled == 0

    trio.run(main)
