"""Claude Code as the oracle: the same project, settings, instructions and MCP server under Claude Code
(``claude -p`` against the simulator) and under speculate, and a table of what each did.

The project has a CLAUDE.md, an MCP server (tests/mcp/server.py), allow and deny rules, and one hook command
for every event that logs its stdin and its environment's names and answers some calls in JSON (a deny, an
updatedInput, context for the model, a block). One scenario drives both: a turn of parallel reads, a
rule-denied read, a rewritten command, a hook-denied write, a write, an edit, an MCP call and a failing
command; a second turn; a compaction; a third turn. :func:`tests.sim.conformance_compare.compare` turns
the two runs into rows (case, Claude Code, speculate, same or not); tests/sim/test_claude_code_conformance.py
checks that every row is the same or an intended difference, which docs/claude-code.md lists with its reason.

``python -m tests.sim.conformance`` runs both and prints the table (the figure in docs/claude-code.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MCP_SERVER = REPO / "tests" / "mcp" / "server.py"
TIME_SCALE = 0.05
EVENTS = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "PreCompact",
    "SessionEnd",
]
PROMPTS = ["look around", "and now", "/compact", "after compact"]
SCENARIO = """
name: conformance
turns:
  - prompt: "look around"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
          - Glob: {pattern: "*.txt"}
          - Grep: {pattern: "alpha"}
      - tools:
          - Read: {file_path: "{root}/secret.txt"}
      - tools:
          - Bash: {command: "echo one"}
      - tools:
          - Write: {file_path: "{root}/locked.txt", content: "no\\n"}
      - tools:
          - Write: {file_path: "{root}/b.txt", content: "beta\\n"}
      - tools:
          - Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "gamma"}
      - tools:
          - mcp__demo__lookup: {word: "alpha"}
      - tools:
          - Bash: {command: "ls missing-dir"}
      - text: "Looked."
    suggestion: null
  - prompt: "and now"
    steps:
      - tools:
          - Read: {file_path: "{root}/b.txt"}
      - text: "Fine."
    suggestion: null
  - prompt: "after compact"
    steps:
      - text: "Compacted."
    suggestion: null
"""
INSTRUCTIONS = "Conformance check: answer in one short sentence.\n"
# The one hook command of every event: logs what it got, answers some calls as Claude Code defines.
HOOK = r"""
import json, os, sys
p = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"stdin": p, "env": sorted(os.environ)}) + "\n")
ev, inp = p["hook_event_name"], p.get("tool_input") or {}
def say(o): print(json.dumps(o))
spec = lambda **k: {"hookSpecificOutput": {"hookEventName": ev, **k}}
if ev == "SessionStart" and p["source"] in ("startup", "compact"):
    print("conformance session context")
elif ev == "UserPromptSubmit":
    say(spec(additionalContext="prompt context: " + p["prompt"]))
elif ev == "PreToolUse" and str(inp.get("file_path", "")).endswith("locked.txt"):
    say(spec(permissionDecision="deny", permissionDecisionReason="locked.txt is frozen"))
elif ev == "PreToolUse" and inp.get("command") == "echo one":
    say(spec(permissionDecision="allow", updatedInput={"command": "echo two"}))
elif ev == "PostToolUse" and p["tool_name"] == "Read":
    say(spec(additionalContext="read context"))
elif ev == "PostToolUse" and p["tool_name"] == "Grep":
    say({"decision": "block", "reason": "grep feedback"})
"""
PERMISSIONS = {
    "allow": ["Read", "Glob", "Grep", "Bash(echo:*)", "Bash(ls:*)", "mcp__demo__lookup"],
    "deny": ["Read(secret.txt)", "mcp__demo__bump"],
}
SHELL_NAMES = {"PWD", "SHLVL", "_", "OLDPWD"}  # bash's own
# Fields only Claude Code sends, for what speculate does not have (docs/claude-code.md, "Hooks"): compared in a
# row of their own, so that the rows per event still catch any other difference.
CLAUDE_ONLY_FIELDS = {"effort", "background_tasks", "session_crons"}
SPECULATE_ENV = {
    "CLAUDE_PROJECT_DIR",
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
    "AI_AGENT",
}  # payloads.hook_env


@dataclass
class Run:
    """What one agent did: the hooks' log, the simulator's requests, and the agent process's environment."""

    hooks: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    served: list[str]
    base_env: set[str]
    fallbacks: int
    root: str
    notes: list[str] = field(default_factory=list)


def make_project(dest: Path, log: Path) -> Path:
    root = dest / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "secret.txt").write_text("s3cret\n")
    (root / "CLAUDE.md").write_text(INSTRUCTIONS)
    (dest / "hook.py").write_text(HOOK)
    cmd = f"{sys.executable} {dest / 'hook.py'} {log}"
    hooks = {e: [{"matcher": "*", "hooks": [{"type": "command", "command": cmd}]}] for e in EVENTS}
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": PERMISSIONS, "hooks": hooks, "enableAllProjectMcpServers": True})
    )
    (root / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [str(MCP_SERVER)]}}})
    )
    return root


def _trace(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return [x["request"] for x in lines], [x["served"]["source"] for x in lines]


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def run_claude_code(dest: Path, binary: Path) -> Run:
    from speculate.sim import SimServer
    from speculate.sim.claude_code import ClaudeCode
    from speculate.sim.scenario_yaml import parse_scenario

    dest.mkdir(parents=True, exist_ok=True)
    log = dest / "hooks.jsonl"
    root = make_project(dest, log)
    cc = ClaudeCode(binary, home=dest / "home")
    cc.home.mkdir()
    notes = []
    with SimServer(
        [parse_scenario(SCENARIO)], seed=0, time_scale=TIME_SCALE, record=dest / "trace.jsonl"
    ) as sim:
        env = cc.env(sim.base_url)
        for i, prompt in enumerate(PROMPTS):
            # The allow list again on the command line: from the settings alone Claude Code 2.1.332 offers no
            # Glob or Grep (the simulator then runs them as Bash commands) and asks before the MCP tool.
            args = [
                str(binary),
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                ",".join(PERMISSIONS["allow"]),
                *(["-c"] if i else []),
                "--",
                prompt,
            ]
            proc = subprocess.run(
                args, cwd=root, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
            )
            if proc.returncode != 0:
                notes.append(f"{prompt!r}: exit {proc.returncode}: {proc.stderr[-500:]}")
        fallbacks = sim.statistics().engine.fallbacks
    requests, served = _trace(dest / "trace.jsonl")
    return Run(_log(log), requests, served, set(env), fallbacks, str(root), notes)


def run_speculate(dest: Path) -> Run:
    import trio

    from speculate.models.anthropic import AnthropicModel
    from speculate.session import SessionConfig, open_session
    from speculate.sim import SimServer
    from speculate.sim.scenario_yaml import parse_scenario

    dest.mkdir(parents=True, exist_ok=True)
    log = dest / "hooks.jsonl"
    root = make_project(dest, log)

    async def main() -> int:
        with SimServer(
            [parse_scenario(SCENARIO)], seed=0, time_scale=TIME_SCALE, record=dest / "trace.jsonl"
        ) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="sim", backoff_s=0.01) as model:
                cfg = SessionConfig(
                    project=root,
                    model=model,
                    speculate=False,
                    mode="acceptEdits",
                    # As Claude Code's run: an untrusted workspace (its allow rules ignored), the allow list
                    # given again on the command line.
                    allow=list(PERMISSIONS["allow"]),
                    hook_transcript_dir=dest / "transcripts",
                )
                async with open_session(cfg) as s:
                    for prompt in PROMPTS:
                        if prompt == "/compact":
                            await s.compact()
                        else:
                            await s.submit(prompt)
            return sim.statistics().engine.fallbacks

    fallbacks = trio.run(main)
    requests, served = _trace(dest / "trace.jsonl")
    return Run(_log(log), requests, served, set(os.environ), fallbacks, str(root.resolve()))


if __name__ == "__main__":
    import tempfile

    from speculate.sim.claude_code import ClaudeCode

    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        sys.exit(binary)
    from tests.sim.conformance_compare import compare, table
    from tests.sim.test_claude_code_conformance import INTENDED

    with tempfile.TemporaryDirectory() as tmp:
        c, s = run_claude_code(Path(tmp) / "cc", binary), run_speculate(Path(tmp) / "sp")
        for note in c.notes:
            print("note:", note)
        print(table(compare(c, s), INTENDED, width=int(sys.argv[1]) if len(sys.argv) > 1 else 400))
