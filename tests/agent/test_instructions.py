"""Project instructions (CLAUDE.md and friends) and the two-part system prompt they land in."""

from __future__ import annotations

import subprocess
from pathlib import Path

import trio

from speculate.instructions import load_instructions
from speculate.models.anthropic import AnthropicModel
from speculate.models.base import CacheKey
from speculate.prompts import STATIC_SYSTEM
from speculate.session import SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.tools import default_tools

SCENARIO = """
name: instructions
description: two short turns
turns:
  - prompt: "first"
    steps:
      - text: "One."
    suggestion: null
  - prompt: "second"
    steps:
      - text: "Two."
    suggestion: null
"""


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_files_load_in_precedence_order_above_the_git_root_too(
    tmp_path: Path, _no_user_claude_dir: Path
) -> None:
    above = put(tmp_path / "CLAUDE.md", "from above the repository\n")  # read, as Claude Code 2.1.332 does
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    user = put(_no_user_claude_dir / "CLAUDE.md", "user: be brief\n")
    put(repo / "AGENTS.md", "agents: use uv\n")  # not read: Claude Code 2.1.332 reads only CLAUDE.md files
    root_md = put(repo / "CLAUDE.md", "root: run make test\n")
    dot = put(repo / ".claude" / "CLAUDE.md", "dot-claude: no emojis\n")
    sub = put(repo / "pkg" / "CLAUDE.md", "pkg: this package is generated\n")
    local = put(repo / "pkg" / "CLAUDE.local.md", "local: my own notes\n")
    (repo / "pkg" / ".claude").mkdir()
    (repo / "pkg" / ".claude" / "CLAUDE.md").symlink_to("../../CLAUDE.md")  # the same file twice counts once
    put(repo / "pkg" / "deeper" / "CLAUDE.md", "below the working directory: not read\n")
    got = load_instructions(repo / "pkg")
    assert [(f.path, f.scope) for f in got.files] == [
        (user, "user"),
        (above, "project"),
        (root_md, "project"),
        (dot, "project"),
        (sub, "project"),
        (local, "local"),
    ]
    text = got.render()
    assert "below the working" not in text and "use uv" not in text
    assert (
        text.index("user: be brief")
        < text.index("from above the repository")
        < text.index("root: run make test")
        < text.index("local: my own notes")
    )
    assert f"Contents of {local} (the user's private project instructions, not checked in):" in text
    assert got.tokens == sum(-(-len(f.text) // 4) for f in got.files) > 0


def test_outside_a_repository_the_directories_above_count_too(tmp_path: Path) -> None:
    put(tmp_path / "CLAUDE.md", "parent\n")
    put(tmp_path / "work" / "CLAUDE.md", "here\n")
    assert [f.text for f in load_instructions(tmp_path / "work").files] == ["parent\n", "here\n"]


def test_breakpoints_static_and_dynamic_parts_and_the_message_tail() -> None:
    tools = [t.schema() for t in default_tools()]
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": p}]}
        if i % 2 == 0
        else {"role": "assistant", "content": [{"type": "text", "text": p}]}
        for i, p in enumerate("abcde")
    ]
    two = CacheKey.build(model="m", system=(STATIC_SYSTEM, "dynamic"), tools=tools).request(msgs)
    marked = lambda blocks: [i for i, b in enumerate(blocks) if "cache_control" in b]  # noqa: E731
    assert marked(two["tools"]) == [] and marked(two["system"]) == [0, 1]
    assert [i for i, m in enumerate(two["messages"]) if marked(m["content"])] == [2, 4]
    one = CacheKey.build(model="m", system="one part", tools=tools).request(msgs)
    assert marked(one["tools"]) == [len(tools) - 1] and marked(one["system"]) == [0]


def test_an_edit_takes_effect_on_the_next_turn_and_sessions_share_the_static_part(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    put(a / "CLAUDE.md", "Always answer in French.\n")
    b.mkdir()

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.01) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x") as model:
                async with open_session(SessionConfig(project=a, model=model, speculate=False)) as s:
                    static, dynamic = s.key.system
                    assert static == STATIC_SYSTEM and f"Working directory: {a.resolve()}" in dynamic
                    assert "Always answer in French." in dynamic
                    await s.submit("first")
                    put(a / "CLAUDE.md", "Always answer in German.\n")
                    out = await s.submit("second")
                    assert s.agent.key is s.key and "Always answer in German." in s.key.system[1]
                    assert s.key.system[0] == static and "French" not in s.key.system[1]
                    assert out.text == "Two."
                # Another project, minutes later in simulated time: its first request reads the static
                # part (tools + identity) that the first session wrote, though its dynamic part differs.
                async with open_session(SessionConfig(project=b, model=model, speculate=False)) as s2:
                    assert s2.key.system[0] == static and s2.key.system[1] != s.key.system[1]
                    out = await s2.submit("first")
                    assert out.result is not None
                    usage = out.result.responses[0].usage
                    assert usage.cache_read_input_tokens >= 1000, usage

    trio.run(main)
