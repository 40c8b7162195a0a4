"""One configuration under the real Claude Code: ``claude -p`` on the scripted turn, against the embedded
simulator, in the configuration's scratch directories (HOME included), and each call classified from its
tool_result.

Under ``-p`` nobody answers a question, so a call Claude Code would ask about comes back refused with an
explanation; a deny rule's refusal reads "Permission to use … has been denied", a hook's names the hook.
So: ran (no error, or "Exit code N" from a command that ran) = allow; a rule's or a hook's refusal = deny;
a tool's own input check (an Edit before the file was read, ...) = ``error``, not a permission decision;
any other refusal = ask, its text kept as the evidence. ``IS_SANDBOX=1``: as root Claude Code refuses
``bypassPermissions`` without it (``--dangerously-skip-permissions cannot be used with root/sudo
privileges``); with it, it runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cases import Call, Config
from .layout import changes, fill, make, scenario, snapshot

TIME_SCALE = 0.01
DENIED = re.compile(
    r"Permission to use .+ has been denied|denied by your permission settings|hook (?:error|blocking)",
    re.DOTALL,  # a command may span lines
)
RAN = re.compile(r"^Exit code \d+")
# Plan mode's Bash check (and auto mode's) is a classifier that runs on Anthropic's servers, which the
# simulator does not play: Claude Code then refuses, saying so. Not a decision: incomparable.
NO_CLASSIFIER = "Auto mode is unavailable"
TOOL_ERRORS = (
    "File has not been read yet",
    "File does not exist",
    "String to replace not found",
    "File has been modified since read",
    "InputValidationError",
    "No such tool available",
    "No changes to make",
)


@dataclass
class Outcome:
    # allow | ask | deny | error (a tool's input check) | classifier (a server-side check the simulator
    # lacks) | missing (no result)
    decision: str
    text: str  # the tool_result (or the refusal), cut to 600 characters
    served: str = ""  # the call as the agent got it, where that differs from the script


@dataclass
class SideRun:
    outcomes: list[Outcome]
    changes: dict[str, str]
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return json.dumps(content)


def classify(is_error: bool, text: str) -> str:
    if not is_error or RAN.match(text):
        return "allow"
    if DENIED.search(text):
        return "deny"
    if text.startswith(NO_CLASSIFIER):
        return "classifier"
    if any(e in text for e in TOOL_ERRORS):
        return "error"
    return "ask"


def served_differently(call: Call, base: Path, name: Any, inp: Any) -> str:
    """The call as served, where it is not the scripted one (fields the script left out may be added)."""
    want = fill(call.input, base)
    if name == call.tool and isinstance(inp, dict) and all(inp.get(k) == v for k, v in want.items()):
        return ""
    return json.dumps({name: inp})[:300]


def outcomes(
    cfg: Config, base: Path, uses: list[dict[str, Any]], results: dict[str, Any], reasons: dict[str, str]
) -> list[Outcome]:
    """Pair the scripted calls with the tool_use blocks the agent got (in order) and their results;
    ``reasons``: tool_use id -> the ``decision_reason_type`` of Claude Code's ``permission_denied`` event,
    kept in front of the text as evidence (``[rule]``, ``[mode]``, ``[safetyCheck]``, ``[workingDir]``…)."""
    out = []
    for i, call in enumerate(cfg.calls):
        if i >= len(uses):
            out.append(Outcome("missing", "the agent never got this call"))
            continue
        use = uses[i]
        served = served_differently(call, base, use.get("name"), use.get("input"))
        res = results.get(use.get("id", ""))
        if res is None:
            out.append(Outcome("missing", "no tool_result", served))
            continue
        is_error, text = res
        reason = reasons.get(use.get("id", ""))
        shown = f"[{reason}] {text}" if reason else text
        out.append(Outcome(classify(is_error, text), shown[:600], served))
    return out


def run(cfg: Config, base: Path, binary: Path) -> SideRun:
    from speculate.sim import SimServer
    from speculate.sim.claude_code import ClaudeCode
    from speculate.sim.scenario_yaml import parse_scenario

    make(cfg, base)
    (base / "run").mkdir()
    before = snapshot(base)
    cc = ClaudeCode(binary, home=base / "home", extra_env={"IS_SANDBOX": "1"})
    args = [str(binary), "-p", "--output-format", "stream-json", "--verbose"]
    if cfg.mode is not None:
        args += ["--permission-mode", cfg.mode]
    notes = []
    t0 = time.perf_counter()
    with SimServer([parse_scenario(scenario(cfg, base))], seed=0, time_scale=TIME_SCALE) as sim:
        proc = subprocess.run(
            [*args, "--", "go"],
            cwd=base / "proj",
            env=cc.env(sim.base_url),
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        if sim.statistics().engine.fallbacks:
            notes.append(f"simulator fallbacks: {sim.statistics().engine.fallbacks}")
    wall = time.perf_counter() - t0
    (base / "run" / "claude.jsonl").write_text(proc.stdout)
    if proc.returncode != 0:
        notes.append(f"claude exited {proc.returncode}: {proc.stderr[-400:]}")
    uses: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("type") == "system" and event.get("subtype") == "permission_denied":
            why = " ".join(
                str(event[k]) for k in ("decision_reason_type", "decision_reason_code") if event.get(k)
            )
            reasons[event.get("tool_use_id", "")] = why
        message = event.get("message")
        for block in message.get("content") or [] if isinstance(message, dict) else []:
            if not isinstance(block, dict):
                continue
            if event.get("type") == "assistant" and block.get("type") == "tool_use":
                uses.append(block)
            elif event.get("type") == "user" and block.get("type") == "tool_result":
                results[block["tool_use_id"]] = (bool(block.get("is_error")), result_text(block["content"]))
    return SideRun(outcomes(cfg, base, uses, results, reasons), changes(before, snapshot(base)), notes, wall)
