"""Comparing the two runs of :mod:`tests.sim.conformance` (Claude Code and speculate on the same project):
:func:`compare` turns them into rows (case, Claude Code, speculate), :func:`table` into the markdown table
of docs/claude-code.md."""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from .conformance import CLAUDE_ONLY_FIELDS, EVENTS, INSTRUCTIONS, SHELL_NAMES, SPECULATE_ENV, Run


def shape(value: Any, depth: int = 1) -> Any:
    """A value's JSON type; an object's keys with their types, ``depth`` levels down."""
    if isinstance(value, dict):
        return {k: shape(v, depth - 1) for k, v in sorted(value.items())} if depth > 0 else "object"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "string"


def _turns(run: Run, claude: bool) -> list[list[dict[str, Any]]]:
    """The hook log split at each UserPromptSubmit and PreCompact. Claude Code starts a process per turn
    (``-p -c``): its SessionStart ``resume`` and SessionEnd between turns are that, not the session."""
    out: list[list[dict[str, Any]]] = [[]]
    ends = [i for i, r in enumerate(run.hooks) if r["stdin"]["hook_event_name"] == "SessionEnd"]
    for i, rec in enumerate(run.hooks):
        p = rec["stdin"]
        if claude and (
            p.get("source") == "resume" or (p["hook_event_name"] == "SessionEnd" and i != ends[-1])
        ):
            continue
        if p["hook_event_name"] in ("UserPromptSubmit", "PreCompact") and out[-1]:
            out.append([])
        out[-1].append(p)
    return out


def _events(turn: list[dict[str, Any]]) -> str:
    tools = Counter(f"{p['hook_event_name']}:{p['tool_name']}" for p in turn if "tool_name" in p)
    others = [
        p["hook_event_name"] + (f"({p['source']})" if "source" in p else "")
        for p in turn
        if "tool_name" not in p
    ]
    return " ".join(others) + (
        f" + {sum(tools.values())} tool events "
        + ", ".join(f"{k}×{v}" if v > 1 else k for k, v in sorted(tools.items()))
        if tools
        else ""
    )


def _fields(run: Run, event: str, claude: bool) -> Any:
    for p in run.hooks:
        p = p["stdin"]
        if p["hook_event_name"] == event and not (claude and p.get("source") == "resume"):
            return shape({k: v for k, v in p.items() if k != "tool_response" and k not in CLAUDE_ONLY_FIELDS})
    return None


def _only_fields(run: Run) -> list[str]:
    return sorted(
        {
            f"{r['stdin']['hook_event_name']}.{k}"
            for r in run.hooks
            for k in r["stdin"]
            if k in CLAUDE_ONLY_FIELDS
        }
    )


def _response(run: Run, tool: str) -> Any:
    for p in run.hooks:
        p = p["stdin"]
        if p["hook_event_name"] == "PostToolUse" and p["tool_name"] == tool:
            return shape(p["tool_response"], depth=2)
    return None


def _env(run: Run) -> set[str]:
    names: set[str] = set()
    for rec in run.hooks:
        names |= set(rec["env"])
    return names - run.base_env - SHELL_NAMES


def _results(run: Run) -> list[tuple[str, str]]:
    """Every tool call the model made and what came back: ran, error (it failed), or refused and why."""
    uses: dict[str, str] = {}
    out: dict[str, tuple[str, str]] = {}
    for req in run.requests:
        for m in req["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_use":
                    args = json.dumps(b["input"], sort_keys=True).replace(run.root, "{root}")
                    uses[b["id"]] = f"{b['name']}({args[:70]})"
                elif b.get("type") == "tool_result" and b["tool_use_id"] in uses:
                    text = b["content"] if isinstance(b["content"], str) else json.dumps(b["content"])
                    status = "ran"
                    if b.get("is_error"):
                        status = (
                            "refused by hook"
                            if "hook error" in text
                            else "failed"
                            if "Exit code" in text
                            else "refused by rule"
                        )
                    out[b["tool_use_id"]] = (uses[b["tool_use_id"]], status)
    return sorted(out.values())


HOOK_LINE = re.compile(
    r"^(?:SessionStart|UserPromptSubmit|PreToolUse|PostToolUse|PostToolUseFailure|Stop)"
    r"(?::\S+)? hook .*$",
    re.MULTILINE,
)


def _said(run: Run) -> list[str]:
    """The hook lines that reached the model (Claude Code: system messages; speculate: system reminders),
    each once, with the hook's command (a path that differs per run) left out."""
    seen: list[str] = []
    for req in run.requests:
        for m in req["messages"]:
            blocks = (
                m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            )
            for b in blocks:
                texts = [b.get("text", "")] + (
                    [b["content"]]
                    if b.get("type") == "tool_result" and isinstance(b.get("content"), str)
                    else []
                )
                for t in texts:
                    for line in HOOK_LINE.findall(t):
                        line = re.sub(r'from command: "[^"]*"', "from command: CMD", line)
                        if line not in seen:
                            seen.append(line)
    return sorted(seen)


def _offered(run: Run) -> list[str]:
    """The MCP tools the model was told of (Claude Code 2.1.332 defers them: their names are in its text)."""
    return sorted({n for r in run.requests for n in re.findall(r"mcp__demo__\w+", json.dumps(r))})


def _instructions(run: Run) -> bool:
    return all(INSTRUCTIONS.strip() in json.dumps(r) for r in run.requests if r.get("tools"))


def _transcript(run: Run) -> str:
    """Whether transcript_path, read after the run, is JSONL holding the first prompt."""
    p = next((r["stdin"] for r in run.hooks if r["stdin"]["hook_event_name"] == "Stop"), None)
    if p is None or not Path(p["transcript_path"]).is_file():
        return "missing"
    lines = [json.loads(x) for x in Path(p["transcript_path"]).read_text().splitlines()]
    users = [json.dumps(x["message"]["content"]) for x in lines if x.get("type") == "user"]
    return "JSONL with the prompt" if any("look around" in u for u in users) else "JSONL without the prompt"


def _prompt_ids(run: Run, claude: bool) -> str:
    turns = [t for t in _turns(run, claude) if t and t[0]["hook_event_name"] == "UserPromptSubmit"]
    ids = [{p.get("prompt_id") for p in t if p["hook_event_name"] != "SessionStart"} for t in turns]
    one = all(len(s) == 1 and None not in s for s in ids)
    distinct = len({next(iter(s)) for s in ids if s}) == len(ids)
    return f"one per turn: {one}, distinct: {distinct}"


def compare(cc: Run, sp: Run) -> list[tuple[str, Any, Any]]:
    """Rows (case, Claude Code, speculate)."""
    rows: list[tuple[str, Any, Any]] = []
    ct, st = _turns(cc, True), _turns(sp, False)
    for i in range(max(len(ct), len(st))):
        rows.append(
            (
                f"hook events, part {i + 1}",
                _events(ct[i]) if i < len(ct) else "-",
                _events(st[i]) if i < len(st) else "-",
            )
        )
    for ev in EVENTS:
        rows.append((f"stdin fields: {ev}", _fields(cc, ev, True), _fields(sp, ev, False)))
    for tool in ("Read", "Edit", "Write", "Bash", "Glob", "Grep", "mcp__demo__lookup"):
        rows.append((f"tool_response: {tool}", _response(cc, tool), _response(sp, tool)))
    rows += [
        ("prompt_id", _prompt_ids(cc, True), _prompt_ids(sp, False)),
        ("transcript_path", _transcript(cc), _transcript(sp)),
        # The variables speculate sets: does Claude Code set each? The rest, each side's own, in a row apart.
        ("environment: speculate's hook variables", sorted(_env(cc) & SPECULATE_ENV), sorted(SPECULATE_ENV)),
        ("environment: only one side's", sorted(_env(cc) - _env(sp)), sorted(_env(sp) - _env(cc))),
        ("stdin fields only Claude Code sends", _only_fields(cc), _only_fields(sp)),
        ("tool calls: ran, failed or refused", _results(cc), _results(sp)),
        ("hook output that reached the model", _said(cc), _said(sp)),
        ("MCP tools offered (one denied)", _offered(cc), _offered(sp)),
        ("CLAUDE.md in every request", _instructions(cc), _instructions(sp)),
        ("simulator fallbacks", cc.fallbacks, sp.fallbacks),
    ]
    return rows


def table(rows: list[tuple[str, Any, Any]], intended: dict[str, str], width: int = 400) -> str:
    out = ["| case | Claude Code 2.1.332 | speculate | same |", "|---|---|---|---|"]
    for case, a, b in rows:
        verdict = "same" if a == b else ("different (intended)" if case in intended else "**different**")
        out.append(f"| {case} | {_cell(a, width)} | {'=' if a == b else _cell(b, width)} | {verdict} |")
    return "\n".join(out)


def _cell(v: Any, width: int) -> str:
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return textwrap.shorten(s, width, placeholder=" …").replace("|", "\\|")
