"""Checked tool results: a turn's tool results against its scripted steps' ``expect`` (exit code, output).

The simulator answers from the script whatever the tools return, so without this a broken environment
(e.g. ``python -m pytest`` exiting 127) would go unnoticed. Step k of the turn is the k-th assistant
message after the prompt; its tool results are in the user message that follows it. :func:`tally` says
what a replay verified (``speculate bench check`` prints it per turn): a turn whose tool results no
expectation covers replayed unverified, whatever its tools returned.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from speculate.sim.scenario import Expect, Step

_EXIT = re.compile(r"(?:^|\n)Exit code (-?\d+)\s*$")


def result_text(block: dict[str, Any]) -> str:
    c = block.get("content", "")
    if isinstance(c, list):
        return "\n".join(b.get("text", "") for b in c if isinstance(b, dict))
    return str(c)


def exit_code(block: dict[str, Any]) -> int | None:
    """Bash's exit code as its result reports it; 0 for a result that is not an error."""
    m = _EXIT.search(result_text(block))
    if m:
        return int(m.group(1))
    return 1 if block.get("is_error") else 0


def unmet(e: Expect, block: dict[str, Any]) -> list[str]:
    text, out = result_text(block), []
    if e.exit_code is not None and (code := exit_code(block)) != e.exit_code:
        out.append(f"exit code {code}, expected {e.exit_code}")
    if e.contains is not None and e.contains not in text:
        out.append(f"output lacks {e.contains!r}")
    if e.matches is not None and not re.search(e.matches, text):
        out.append(f"output does not match /{e.matches}/")
    if out:
        tail = text.strip().splitlines()[-1:] or [""]
        out[-1] += f" (last line: {tail[0][:120]!r})"
    return out


def _results(
    steps: tuple[Step, ...], messages: Sequence[Mapping[str, Any]]
) -> list[tuple[int, int, Expect | None, dict[str, Any] | None]]:
    """(step index, call index, the call's expect, its result block or None when missing) for each tool call
    of the turn."""
    out: list[tuple[int, int, Expect | None, dict[str, Any] | None]] = []
    k = -1
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        k += 1
        step = steps[k] if k < len(steps) else None
        ids = [b["id"] for b in m.get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]
        nxt = messages[i + 1] if i + 1 < len(messages) else {}
        content = nxt.get("content", []) if nxt.get("role") == "user" else []
        results = {
            b.get("tool_use_id"): b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
        }
        out += [(k, j, step.expect_at(j) if step else None, results.get(tid)) for j, tid in enumerate(ids)]
    return out


def tally(steps: tuple[Step, ...], messages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What a turn's replay verified: its tool results, how many an expectation checked, and how many of the
    unchecked ones were errors (a failed Read no expectation covers: the replay diverged unseen)."""
    found = _results(steps, messages)
    return {
        "results": len(found),
        "checked": sum(e is not None and b is not None for _, _, e, b in found),
        "unchecked_errors": sum(
            e is None and b is not None and bool(b.get("is_error")) for _, _, e, b in found
        ),
    }


def check_turn(steps: tuple[Step, ...], messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Unmet expectations of one turn, given the messages the turn added after its prompt."""
    problems: list[str] = []
    for k, j, expect, block in _results(steps, messages):
        if expect is None:
            continue
        if block is None:
            problems.append(f"step {k + 1} tool {j + 1}: no result")
            continue
        problems += [f"step {k + 1} tool {j + 1}: {p}" for p in unmet(expect, block)]
    return problems
