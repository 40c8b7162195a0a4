"""The agent loop through the real anthropic SDK against the embedded simulator (no SDK patching)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.agent import Agent
from speculate.agent_types import ToolFinished, ToolStarted
from speculate.fs import LocalFS, LocalShell
from speculate.models.anthropic import AnthropicModel
from speculate.models.base import CacheKey, ModelError
from speculate.prompts import system_prompt
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import FaultConfig, SimServer
from speculate.speculation.authorize import MainAuthorizer
from speculate.tools import default_tools
from speculate.tools.base import ToolContext

from .conftest import write_tree

SCENARIO = """
name: loop-test
description: reads in parallel, edits, runs a slow command
files:
  a.txt: "alpha\\n"
  b.txt: "beta\\n"
turns:
  - prompt: "read both files"
    steps:
      - text: "Reading both."
        tools:
          - Read: {file_path: "{root}/a.txt"}
          - Read: {file_path: "{root}/b.txt"}
          - Read: {file_path: "{root}/missing.txt"}
      - text: "a says alpha, b says beta."
    suggestion: "change alpha to gamma"
  - prompt: "change alpha to gamma"
    steps:
      - tools:
          - Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "gamma"}
      - text: "Done."
    suggestion: null
  - prompt: "sleep a while"
    steps:
      - tools:
          - Bash: {command: "sleep 30"}
      - text: "Slept."
    suggestion: null
"""


def make_agent(model: AnthropicModel, root: Path, events: list) -> Agent:
    tools = default_tools()
    key = CacheKey.build(
        model="claude-sonnet-4-6", system=system_prompt(root), tools=[t.schema() for t in tools]
    )
    ctx = ToolContext(fs=LocalFS(root), shell=LocalShell(root), spill_dir=root.parent / "spill")
    auth = MainAuthorizer(mode="acceptEdits", allow=[], deny=[], ask=None, root=root)
    return Agent(model=model, key=key, tools=tools, ctx=ctx, authorizer=auth, on_event=events.append)


@asynccontextmanager
async def sim_agent(
    root: Path,
    events: list,
    *,
    time_scale: float,
    seed: int = 0,
    faults: FaultConfig | None = None,
    **model_kw: Any,
) -> AsyncIterator[Agent]:
    """An agent on the real tree of ``root``, talking through the SDK to a simulator serving SCENARIO."""
    with SimServer([parse_scenario(SCENARIO)], time_scale=time_scale, seed=seed, faults=faults) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", **model_kw) as model:
            yield make_agent(model, root, events)


def project(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj", {"a.txt": "alpha\n", "b.txt": "beta\n"})


def test_turns_run_tools_in_call_order_and_share_the_cache(tmp_path: Path) -> None:
    root = project(tmp_path)
    events: list = []

    async def main() -> None:
        async with sim_agent(root, events, time_scale=0.01) as agent:
            r1 = await agent.run("read both files")
            assert r1.text == "a says alpha, b says beta."
            results = agent.messages[2]["content"]
            assert [b["type"] for b in results] == ["tool_result"] * 3
            assert "alpha" in results[0]["content"] and "beta" in results[1]["content"]
            assert results[2].get("is_error") is True  # a missing file goes back to the model
            r2 = await agent.run("change alpha to gamma")
            assert (root / "a.txt").read_text() == "gamma\n"
            assert r2.written or r2.tools_run == 1
            # every request after the first reads the prefix the previous one cached
            later = [*r1.responses[1:], *r2.responses]
            assert all(r.usage.cache_read_input_tokens > 0 for r in later)

    trio.run(main)
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert len(started) == len(finished) == 4


def test_cancel_mid_tool_leaves_a_valid_conversation(tmp_path: Path) -> None:
    root = project(tmp_path)

    async def main() -> None:
        async with sim_agent(root, [], time_scale=0.01) as agent:
            await agent.run("read both files")
            await agent.run("change alpha to gamma")
            with trio.move_on_after(1.0):
                await agent.run("sleep a while")
            last = agent.messages[-1]
            assert last["role"] == "user"
            (res,) = last["content"]
            assert res["type"] == "tool_result" and res["is_error"] and "Interrupted" in res["content"]
            uses = [b["id"] for b in agent.messages[-2]["content"] if b["type"] == "tool_use"]
            assert uses == [res["tool_use_id"]]

    trio.run(main)


@pytest.mark.parametrize("fault", ["overloaded", "rate_limit", "drop"])
def test_transient_faults_are_retried(tmp_path: Path, fault: str) -> None:
    root = project(tmp_path)

    async def main() -> None:
        faults = FaultConfig(**{f"{fault}_rate": 0.5}, retry_after_s=0.5)
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.01, seed=3, faults=faults) as sim:
            async with AnthropicModel(
                base_url=sim.base_url, api_key="x", backoff_s=0.01, max_attempts=12
            ) as model:
                r = await make_agent(model, root, []).run("read both files")
            injected = sim.statistics().faults[fault]
        assert r.text == "a says alpha, b says beta."
        # Every fault the simulator injected cost exactly one more attempt of some request (seed 3 at rate
        # 0.5 injects some: a run without any would not test retrying).
        assert injected >= 1
        assert sum(x.attempts - 1 for x in r.responses) == injected

    trio.run(main)


def test_exhausted_retries_surface_one_clear_error(tmp_path: Path) -> None:
    root = project(tmp_path)

    async def main() -> None:
        async with sim_agent(
            root, [], time_scale=0.01, faults=FaultConfig(overloaded_rate=1.0), backoff_s=0.01, max_attempts=3
        ) as agent:
            with pytest.raises(ModelError, match=r"529 overloaded_error after 3 attempt"):
                await agent.run("read both files")
            assert agent.messages[-1]["role"] == "user"  # nothing half-appended

    trio.run(main)


def test_max_tokens_continues_a_bounded_number_of_times(tmp_path: Path) -> None:
    root = project(tmp_path)

    async def main() -> None:
        async with sim_agent(root, [], time_scale=0.01) as agent:
            agent.key = CacheKey.build(
                model=agent.key.model,
                system=agent.key.system,
                tools=[t.schema() for t in default_tools()],
                max_tokens=3,
            )
            r = await agent.run("read both files")
            assert [x.stop_reason for x in r.responses][-1] == "max_tokens"
            assert len(r.responses) == 4  # the first answer plus three "continue" requests
            roles = [m["role"] for m in agent.messages]
            assert all(a != b for a, b in itertools.pairwise(roles))  # still alternating

    trio.run(main)


def test_read_only_calls_start_while_the_response_is_still_streaming(tmp_path: Path) -> None:
    root = project(tmp_path)
    events: list = []

    paths: dict[str, str] = {}  # tool_use id -> the path it reads (a summary shortens a long one)

    async def main() -> None:
        async with sim_agent(root, events, time_scale=0.2) as agent:
            await agent.run("read both files")
            paths.update(
                {
                    b["id"]: b["input"].get("file_path", "")
                    for m in agent.messages
                    if m["role"] == "assistant" and isinstance(m["content"], list)
                    for b in m["content"]
                    if b.get("type") == "tool_use"
                }
            )

    trio.run(main)
    first_done = next(i for i, e in enumerate(events) if type(e).__name__ == "ResponseDone")
    started_early = [e for e in events[:first_done] if isinstance(e, ToolStarted)]
    # the first Read's block completed while the later blocks were still streaming
    assert started_early and paths[started_early[0].id].endswith("/a.txt")
