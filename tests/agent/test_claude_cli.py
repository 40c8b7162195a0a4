"""The claude-cli backend: the real Claude Code CLI, pointed at the simulator (ANTHROPIC_BASE_URL) whose
scenario answers with <tool_use> text (``tool_calls: text``). Our agent parses and runs the calls."""

from __future__ import annotations

import json
from contextlib import aclosing
from pathlib import Path

import pytest
import trio

from speculate.models.base import Done
from speculate.models.claude_cli import ClaudeCliModel
from speculate.models.text_tools import ORPHANED
from speculate.session import SessionConfig, open_session
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.types import user

SCENARIO = """
name: text-tools
tool_calls: text
turns:
  - prompt: "look at a"
    steps:
      - text: "Reading it."
        tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a.txt holds alpha."
    suggestion: "look at b"
  - prompt: "look at b"
    steps:
      - tools:
          - WebSearch: {query: "beta"}
          - Read: {file_path: "{root}/b.txt"}
      - text: "b.txt holds beta."
    suggestion: "look at c"
  - prompt: "look at c"
    steps:
      - tools:
          - Read: {file_path: "{root}/c.txt"}
      - text: "c.txt holds gamma."
    suggestion: null
"""


def cli_model(tmp: Path, base_url: str) -> ClaudeCliModel:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    cc = ClaudeCode(binary, home=tmp / "home")
    (tmp / "home").mkdir(exist_ok=True)
    (tmp / "cli-cwd").mkdir(exist_ok=True)
    return ClaudeCliModel(binary=binary, env=cc.env(base_url), cwd=tmp / "cli-cwd", timeout_s=120)


@pytest.mark.slow
def test_a_session_on_the_cli_runs_text_tool_calls_resumes_the_cache_and_accepts_a_speculation(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    for name, text in (("a.txt", "alpha\n"), ("b.txt", "beta\n"), ("c.txt", "gamma\n")):
        (root / name).write_text(text)

    async def main() -> None:
        trace = tmp_path / "trace.jsonl"
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.05, record=trace) as sim:
            model = cli_model(tmp_path, sim.base_url)
            cfg = SessionConfig(project=root, model=model, events_path=tmp_path / "events.jsonl")
            async with open_session(cfg) as s:
                first = await s.submit("look at a")
                assert first.error == "" and first.text == "a.txt holds alpha.", first
                assert first.result is not None and first.result.tools_run == 1
                results = [b for b in s.messages[2]["content"] if b["type"] == "tool_result"]
                assert (
                    len(results) == 1 and "alpha" in results[0]["content"] and not results[0].get("is_error")
                )
                # The second request of the turn resumed the first one's CLI session and read its cache.
                assert "--resume" in model.runs[1] and "--fork-session" in model.runs[1]
                assert first.result.responses[1].usage.cache_read_input_tokens > 0
                assert await s.wait_suggestion() == "look at b"
                await s.wait_speculation()
                second = await s.submit("look at b")  # the suggestion: accept the speculation
                assert second.accepted and second.text == "b.txt holds beta.", second
                spec = second.speculation
                assert spec is not None and spec.tokens["cache_read_input_tokens"] > 0
                # The fork's call to WebSearch (not offered) was dropped and reported with its next request.
                uses = [
                    b["name"]
                    for m in s.messages
                    if m["role"] == "assistant"
                    for b in m["content"]
                    if b["type"] == "tool_use"
                ]
                assert uses == ["Read", "Read"]
                third = await s.submit("look at c")
                assert third.text == "c.txt holds gamma.", third
                # A call left without a result (an interrupted turn, as a resumed transcript may hold it):
                # the request repairs it with a synthetic error result, and the CLI session resumes.
                orphan = [*s.messages[:2], user("look at b")]
                async with aclosing(model.stream(s.key, orphan)) as stream:
                    done = [u async for u in stream if isinstance(u, Done)]
                repaired = [r for r in model.runs if ORPHANED in r[-1]]
                assert len(repaired) == 1 and "--resume" in repaired[0]
                assert [
                    b["name"] for b in done[0].response.message["content"] if b["type"] == "tool_use"
                ] == ["Read"]
        requests = [json.loads(line)["request"] for line in trace.read_text().splitlines()]
        assert all(not r.get("tools") for r in requests)  # the CLI's own tools are off
        sent = [json.dumps(r["messages"]) for r in requests]
        assert any("'WebSearch' is not one of the offered tools" in m for m in sent)
        assert any("<tools>" in m and "input_schema" in m for m in sent)
        assert sim.statistics().engine.fallbacks == 0

    trio.run(main)


@pytest.mark.slow
def test_a_long_session_on_the_cli_compacts_and_goes_on(tmp_path: Path) -> None:
    from dataclasses import replace

    from speculate.models.profiles import PROFILES

    from .test_compaction import FILES, MODEL, N, scenario

    root = tmp_path / "proj"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    text_mode = scenario().replace("turns:", "tool_calls: text\nturns:", 1)
    profiles = tuple(replace(p, context_window=16_000) if p.name == MODEL else p for p in PROFILES)

    async def main() -> None:
        with SimServer([parse_scenario(text_mode)], time_scale=0.05, profiles=profiles) as sim:
            model = cli_model(tmp_path, sim.base_url)
            cfg = SessionConfig(
                project=root,
                model=model,
                model_name=MODEL,
                speculate=False,
                context_window=16_000,
                compact_margin=6_000,
            )
            async with open_session(cfg) as s:
                for i in range(1, N + 1):
                    out = await s.submit(f"read file {i}")
                    assert not out.error and out.text == f"File {i} read.", out
                assert s.statistics()["compactions"] >= 1
                # The summary went through the CLI; the turn after it started a fresh CLI session.
                summaries = [r for r in model.runs if "[COMPACTION]" in r[-1]]
                assert summaries and "--resume" in summaries[0]
                fresh = [
                    r for r in model.runs if r[-1].lstrip().startswith("<system-reminder>\nYou can call")
                ]
                assert len(fresh) == 1 + len(summaries)

    trio.run(main)


@pytest.mark.slow
def test_the_api_error_through_the_cli_is_a_model_error_naming_it(tmp_path: Path) -> None:
    from dataclasses import replace

    from speculate.models.base import CacheKey, ModelError
    from speculate.models.profiles import PROFILES

    profiles = tuple(replace(p, context_window=100) if p.name == "claude-sonnet-4-6" else p for p in PROFILES)

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.05, profiles=profiles) as sim:
            model = cli_model(tmp_path, sim.base_url)
            key = CacheKey.build(model="claude-sonnet-4-6", system="Working directory: /p", tools=[])
            with pytest.raises(ModelError, match=r"(?i)prompt is too long"):  # the CLI words it its own way
                async for _ in model.stream(key, [user("look at a")]):
                    pass

    trio.run(main)
