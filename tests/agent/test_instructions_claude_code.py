"""Claude Code 2.1.332 as the oracle for instructions: one project with rules files (unscoped, path-scoped,
in a subdirectory, excluded), a CLAUDE.md above the git root, HTML comments, imports with punctuation and
``claudeMdExcludes``, run under ``claude -p`` and under speculate on the simulator with the same scenario.
The files each sends at start (path and text) and the reminders after each tool result must be the same."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.models.anthropic import AnthropicModel
from speculate.session import SessionConfig, open_session
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer

LAYOUT = {
    "outer/CLAUDE.md": "OUTER\n\n<!-- a maintainer's note -->\n"
    "See @proj/docs/guide.md and @proj/docs/guide.md. and @proj/docs/other.md, and @proj/docs/excl.md\n",
    "outer/.claude/rules/anc.md": "---\npaths: proj/src/**/*.ts\n---\nANCESTOR TS RULE\n",
    "outer/proj/CLAUDE.md": "---\ndescription: x\n---\nPROJECT <!-- inline kept -->\n\n<!-- block gone -->\n\n"
    "- item\n<!-- after list -->\n\n> quote\n<!-- after quote -->\n\nPara\n<!-- col0 -->\n\n"
    "```\n<!-- fenced -->\n```\n@docs/notes#section\n",
    "outer/proj/.claude/CLAUDE.md": "DOT CLAUDE\n",
    "outer/proj/.claude/rules/style.md": "STYLE RULE @../../docs/style-extra.md\n",
    "outer/proj/.claude/rules/ts.md": '---\npaths:\n  - "src/**/*.ts"\n---\nTS RULE @../../docs/ts-extra.md\n',
    "outer/proj/.claude/rules/py.md": '---\npaths: "*.py"\n---\nPY RULE\n',
    "outer/proj/.claude/rules/sub/deep.md": "DEEP RULE\n",
    "outer/proj/.claude/rules/excluded.md": "EXCLUDED RULE\n",
    "outer/proj/.claude/settings.json": json.dumps(
        {"claudeMdExcludes": ["**/docs/excl.md", "**/rules/excluded.md"]}
    ),
    "outer/proj/CLAUDE.local.md": "LOCAL\n",
    "outer/proj/docs/guide.md": "GUIDE\n",
    "outer/proj/docs/other.md": "OTHER\n",
    "outer/proj/docs/excl.md": "EXCL\n",
    "outer/proj/docs/notes": "NOTES\n",
    "outer/proj/docs/style-extra.md": "STYLE EXTRA\n",
    "outer/proj/docs/ts-extra.md": "TS EXTRA\n",
    "outer/proj/src/app.ts": "let x = 1\n",
    "outer/proj/lib/CLAUDE.md": "---\npaths: nomatch\n---\nLIB CLAUDE\n<!-- lib comment -->\n",
    "outer/proj/lib/x.txt": "x\n",
    "outer/proj/lib/.claude/rules/l.md": "LIB RULE\n",
    "outer/proj/lib/.claude/rules/ls.md": '---\npaths: "*.txt"\n---\nLIB TXT RULE\n',
    "home/.claude/CLAUDE.md": "USER\n",
    "home/.claude/rules/u.md": "USER RULE\n",
    "home/.claude/rules/us.md": '---\npaths: "lib/**"\n---\nUSER LIB RULE\n',
}
SCENARIO = """
name: instruction-rules
turns:
  - prompt: "go"
    steps:
      - tools:
          - Read: {file_path: "{root}/src/app.ts"}
      - tools:
          - Write: {file_path: "{root}/tool.py", content: "print(1)\\n"}
      - tools:
          - Read: {file_path: "{root}/lib/x.txt"}
      - text: "done"
    suggestion: null
"""
ENTRY = re.compile(r"Contents of (\S+) \([^)]*\):\n\n")


def lay_out(base: Path) -> tuple[Path, Path]:
    for rel, text in LAYOUT.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    root = base / "outer" / "proj"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    home = base / "home"
    (home / ".claude.json").write_text(
        json.dumps({"projects": {str(root): {"hasTrustDialogAccepted": True}}})
    )
    return root, home


def entries(text: str) -> list[tuple[str, str]]:
    """(path, text) of each start-up file; the scope's wording is each program's own."""
    found = list(ENTRY.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return [(m.group(1), text[m.end() : end].strip()) for m, end in zip(found, ends, strict=True)]


def after_results(messages: list[dict[str, Any]]) -> list[list[str]]:
    """The text blocks after each message's tool results."""
    return [
        [b["text"].rstrip("\n") for b in m["content"] if b.get("type") == "text"]
        for m in messages
        if m["role"] == "user"
        and isinstance(m["content"], list)
        and any(b.get("type") == "tool_result" for b in m["content"])
    ]


def claude_code(base: Path, binary: Path) -> tuple[list[tuple[str, str]], list[list[str]]]:
    root, home = lay_out(base)
    trace = base / "trace.jsonl"
    scenario = parse_scenario(SCENARIO.replace("{root}", str(root)))
    with SimServer([scenario], seed=0, time_scale=0.01, record=trace) as sim:
        turn = ClaudeCode(binary, home=home).turn("go", project=root, base_url=sim.base_url, resume=False)
    assert turn.returncode == 0, turn.stderr[-2000:]
    requests = [json.loads(line)["request"] for line in trace.read_text().splitlines()]
    main = max((r for r in requests if r.get("tools")), key=lambda r: len(r["messages"]))
    first = main["messages"][0]["content"]
    (start,) = [b["text"] for b in first if b.get("type") == "text" and "Contents of " in b["text"]]
    return entries(start.removesuffix("</system-reminder>")), after_results(main["messages"])


def speculate(base: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, str]], list[list[str]]]:
    root, home = lay_out(base)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    got: dict[str, Any] = {}

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.01) as sim:
            async with (
                AnthropicModel(base_url=sim.base_url, api_key="x") as model,
                open_session(SessionConfig(project=root, model=model, speculate=False)) as s,
            ):
                out = await s.submit("go")
                assert out.text == "done", out
                got["system"], got["messages"] = s.key.system[1], list(s.messages)

    trio.run(main)
    return entries(got["system"]), after_results(got["messages"])


@pytest.mark.slow
def test_speculate_sends_the_instructions_claude_code_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    cc_start, cc_after = claude_code(tmp_path / "claude-code", binary)
    sp_start, sp_after = speculate(tmp_path / "speculate", monkeypatch)
    strip = lambda items: [(p.replace(str(tmp_path / "claude-code"), "T"), t) for p, t in items]  # noqa: E731
    assert strip(cc_start) == [(p.replace(str(tmp_path / "speculate"), "T"), t) for p, t in sp_start]
    assert [p for p, _ in strip(cc_start)][:3] == [
        "T/home/.claude/CLAUDE.md",
        "T/home/.claude/rules/u.md",
        "T/outer/CLAUDE.md",
    ]
    same = lambda runs, base: [[b.replace(str(tmp_path / base), "T") for b in bs] for bs in runs]  # noqa: E731
    assert same(cc_after, "claude-code") == same(sp_after, "speculate")
    assert [len(bs) for bs in cc_after] == [2, 1, 4]  # the Read, the Write and the Read each brought some
