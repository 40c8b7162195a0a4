"""Claude Code's permission rule forms in a real session: a project's .claude/settings.json as the issue found
it (a deny on ``Read(./src/shop/pager.py)``, an ask on ``Edit(./tests/**)``, a bare ``Grep`` deny), driven
through the simulator with the anthropic SDK."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from speculate.models.anthropic import AnthropicModel
from speculate.session import SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer

SCENARIO = """
name: rule-forms
turns:
  - prompt: "look at the pager and add a test"
    steps:
      - tools:
          - Read: {file_path: "{root}/src/shop/pager.py"}
          - Edit: {file_path: "{root}/src/shop/pager.py", old_string: "x = 1", new_string: "x = 2"}
          - Write: {file_path: "{root}/tests/test_pager.py", content: "def test(): pass\\n"}
          - Read: {file_path: "{root}/src/shop/cart.py"}
          - Glob: {pattern: "**/*.py"}
      - text: "Done."
    suggestion: null
"""


def test_claude_code_rule_forms_deny_ask_and_withhold(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "src" / "shop").mkdir(parents=True)
    (root / "src" / "shop" / "pager.py").write_text("x = 1\n")
    (root / "src" / "shop" / "cart.py").write_text("cart = []\n")
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(
        json.dumps(
            {"permissions": {"deny": ["Read(./src/shop/pager.py)", "Grep"], "ask": ["Edit(./tests/**)"]}}
        )
    )
    asked: list[tuple[str, str]] = []

    async def ask(tool: str, why: str) -> str:
        asked.append((tool, why))
        return "n"

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.02) as sim:
            async with (
                AnthropicModel(base_url=sim.base_url, api_key="x") as model,
                open_session(
                    SessionConfig(project=root, model=model, mode="bypassPermissions", speculate=False),
                    ask=ask,
                ) as s,
            ):
                offered = [json.loads(t)["name"] for t in s.key.tools_json]
                assert "Grep" not in offered and "Read" in offered  # wholly denied: not offered at all
                out = await s.submit("look at the pager and add a test")
                # Calls were refused, so the simulator answers off its script (never the scripted "Done.",
                # which would report what the refused calls did).
                assert "off its script" in out.text and "Done." not in out.text, out
                read, edit, write, cart, glob = s.messages[2]["content"]
                assert read["is_error"] and "Read(./src/shop/pager.py)" in read["content"]
                assert (
                    edit["is_error"] and "Read(./src/shop/pager.py)" in edit["content"]
                )  # a Read deny covers edits
                assert write["is_error"] and not (root / "tests" / "test_pager.py").exists()
                assert [t for t, _ in asked] == ["Write"]  # asked, though bypassPermissions: the ask rule
                assert not cart.get("is_error") and "cart = []" in cart["content"]
                assert (
                    "cart.py" in glob["content"] and "pager.py" not in glob["content"]
                )  # left out, as in Claude Code
        assert (root / "src" / "shop" / "pager.py").read_text() == "x = 1\n"

    trio.run(main)


GREP = """
name: grep-hides
turns:
  - prompt: "where is the token"
    steps:
      - tools:
          - Grep: {pattern: "token", output_mode: content}
          - Grep: {pattern: "token", path: "{root}/secrets"}
      - text: "Found it."
    suggestion: null
"""


def test_grep_leaves_out_what_a_read_deny_covers(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "k.env").write_text("token = 's3cret'\n")
    (root / "app.py").write_text("token = load()\n")
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Read(*.env)", "Read(./secrets/**)"]}})
    )

    async def main() -> None:
        with SimServer([parse_scenario(GREP)], time_scale=0.02) as sim:
            async with (
                AnthropicModel(base_url=sim.base_url, api_key="x") as model,
                open_session(SessionConfig(project=root, model=model, speculate=False)) as s,
            ):
                await s.submit("where is the token")
                everywhere, inside = s.messages[2]["content"]
                assert (
                    "app.py:1:token = load()" in everywhere["content"]
                    and "s3cret" not in everywhere["content"]
                )
                assert inside["is_error"] and "Read(./secrets/**)" in inside["content"]

    trio.run(main)
