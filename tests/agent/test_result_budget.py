"""The tool-result budget per message: a step whose results add up to too much keeps the small ones and
replaces the largest by a preview plus the path of the full text."""

from __future__ import annotations

from pathlib import Path

import trio

from speculate.agent import Agent
from speculate.fs import LocalFS, LocalShell
from speculate.models.anthropic import AnthropicModel
from speculate.models.base import CacheKey
from speculate.prompts import system_prompt
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.authorize import MainAuthorizer
from speculate.tools import default_tools
from speculate.tools.base import ToolContext
from speculate.tools.budget import fit_results
from speculate.types import tool_result

SCENARIO = """
name: budget
turns:
  - prompt: "read all three"
    steps:
      - tools:
          - Read: {file_path: "{root}/big.txt"}
          - Read: {file_path: "{root}/mid.txt"}
          - Read: {file_path: "{root}/small.txt"}
      - text: "Read."
"""


def test_the_largest_results_become_previews_until_the_message_fits(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "big.txt").write_text("".join(f"big line {i}\n" for i in range(1500)))  # ~30,000 chars as read
    (root / "mid.txt").write_text("".join(f"mid line {i}\n" for i in range(600)))  # ~12,000
    (root / "small.txt").write_text("small\n")
    tools = default_tools()
    key = CacheKey.build(
        model="claude-sonnet-4-6", system=system_prompt(root), tools=[t.schema() for t in tools]
    )
    ctx = ToolContext(fs=LocalFS(root), shell=LocalShell(root), spill_dir=tmp_path / "spill")
    auth = MainAuthorizer(mode="acceptEdits", allow=[], deny=[], ask=None, root=root)

    async def main() -> Agent:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.01) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x") as model:
                agent = Agent(
                    model=model, key=key, tools=tools, ctx=ctx, authorizer=auth, result_budget=20_000
                )
                assert (await agent.run("read all three")).text == "Read."
                return agent

    agent = trio.run(main)
    big, mid, small = agent.messages[2]["content"]
    assert big["content"].startswith("Showing first 100 lines of 1500 (")
    path = Path(big["content"].split("Full text saved to ")[1].split(" ")[0])
    assert path.parent == tmp_path / "spill" and "big line 1499" in path.read_text()
    assert "big line 99" in big["content"] and "big line 100\n" not in big["content"]
    # Once the largest was cut the rest fit: they stay whole.
    assert "mid line 599" in mid["content"] and "small" in small["content"]
    assert sum(len(b["content"]) for b in (big, mid, small)) <= 20_000


def test_results_that_fit_are_unchanged(tmp_path: Path) -> None:
    ctx = ToolContext(fs=LocalFS(tmp_path), shell=LocalShell(tmp_path), spill_dir=tmp_path / "spill")
    results = [tool_result("a", "x" * 50), tool_result("b", [{"type": "text", "text": "y" * 500}])]
    assert fit_results(results, ctx, budget=600) == results
    assert not (tmp_path / "spill").exists()


def test_a_result_of_several_blocks_counts_and_is_cut_keeping_its_images(tmp_path: Path) -> None:
    """An MCP tool's result is a list of blocks, each under its own limit: together they count."""
    ctx = ToolContext(fs=LocalFS(tmp_path), shell=LocalShell(tmp_path), spill_dir=tmp_path / "spill")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    blocks = [{"type": "text", "text": f"block {i}\n" + "z" * 9_000} for i in range(10)]
    (out,) = fit_results([tool_result("m", [*blocks, image])], ctx, budget=20_000)
    text, kept = out["content"]
    assert text["text"].startswith("Showing first 20 lines of 20 (90089 chars") and kept == image
    assert len(text["text"]) < 20_000
    (saved,) = (tmp_path / "spill").iterdir()
    assert saved.read_text().startswith("block 0\n")
