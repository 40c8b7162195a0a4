"""A recorded session as a scenario (docs/scenarios.md): prompts, steps, expectations, suggestions, pauses.

Each assistant message is a step: its text, thinking and tool calls, the project root written ``{root}``.
Claude Code's six file and shell tools become speculate's (``timeout`` in ms as ``timeout_ms``, Grep's
``-i`` as ``case_insensitive``; fields speculate's tools lack are dropped and counted); its other tools pass
through unchecked where the scenario format knows them, and are dropped and counted where it does not. A
call with no result (interrupted), or a Write or Edit outside the project, is dropped. A step left without
calls hands its text to the next one; a turn that ended on calls (interrupted, or the transcript stops)
gets a closing step saying so. A turn's ``suggestion`` is its next prompt when the user took that prompt
from Claude Code's suggestion (``promptSource: suggestion_accepted``), else null: Claude Code does not
record a suggestion it showed and the user ignored. ``pause_s`` is the recorded time from the end of the
previous answer to the prompt.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from speculate.importers import checks
from speculate.importers.sessions import ACCEPTED, Counts, RecordedSession, RecordedTurn, ToolUse, step_text
from speculate.importers.tree import Replayed, project_path
from speculate.sim.scenario_tools import MCP_PREFIX, OTHER_TOOLS, tool_inputs
from speculate.tools.registry import WRITE_TOOLS, path_of

RENAMES = {"Bash": {"timeout": "timeout_ms"}, "Grep": {"-i": "case_insensitive"}}
WRITERS = WRITE_TOOLS  # tools that write a file (speculate.tools.registry)
INTERRUPTED_TEXT = "[the user interrupted this turn here]"
CUT_TEXT = "[the transcript ends here]"
NO_TEXT = "[the answer had no text]"


class Rooter:
    """The recorded project root in any string written as ``{root}``."""

    def __init__(self, cwd: str | None) -> None:
        root = cwd.rstrip("/") if cwd and cwd != "/" else None
        self.pattern = re.compile(re.escape(root) + r"(?![\w.@+-])") if root else None

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.pattern.sub("{root}", value) if self.pattern is not None else value
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value


def _validated(name: str, inp: dict[str, Any], counts: Counts) -> dict[str, Any] | None:
    """The input as speculate's tool accepts it (strictly), optional fields it refuses dropped."""
    model = tool_inputs()[name]
    for _ in range(len(inp) + 1):
        try:
            model.model_validate(inp, strict=True)
            return inp
        except ValidationError as e:
            loc = e.errors()[0]["loc"]
            field = str(loc[0]) if loc else ""
            if (
                field not in inp
                or model.model_fields.get(field, None) is None
                or model.model_fields[field].is_required()
            ):
                counts[f"{name} calls speculate's tool cannot take (dropped)"] += 1
                return None
            counts[f"tool input fields dropped ({name}.{field})"] += 1
            inp = {k: v for k, v in inp.items() if k != field}
    return None


def scripted_call(use: ToolUse, cwd: str | None, root: Rooter, counts: Counts) -> dict[str, Any] | None:
    """``{Name: input}`` as a scenario step scripts it, or None when the call is dropped."""
    name = use.name
    if name in WRITERS and project_path(path_of(name, use.input), cwd) is None:
        counts["writes outside the project (dropped)"] += 1
        return None
    if name in tool_inputs():
        renames = RENAMES.get(name, {})
        fields = tool_inputs()[name].model_fields
        inp: dict[str, Any] = {}
        for k, v in use.input.items():
            k = renames.get(k, k)
            if k not in fields:
                counts[f"tool input fields dropped ({name}.{k})"] += 1
            elif v is not None:
                inp[k] = v
        checked = _validated(name, root(inp), counts)
        return None if checked is None else {name: checked}
    if name in OTHER_TOOLS or name.startswith(MCP_PREFIX):
        return {name: root(dict(use.input))}
    counts[f"calls of tools scenarios cannot script ({name}, dropped)"] += 1
    return None


def render_turn(
    turn: RecordedTurn, replayed: Replayed, ctx: checks.Context, cwd: str | None, root: Rooter, counts: Counts
) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    carried: list[str] = []  # text of steps without calls (all dropped, or the answer), for the next step
    ended_on_calls = False
    for step in turn.steps:
        calls: list[dict[str, Any]] = []
        found: list[checks.Check | None] = []
        for use in step.tools:
            if use.result is None:
                counts["tool calls without a result (interrupted, dropped)"] += 1
                continue
            call = scripted_call(use, cwd, root, counts)
            if call is None:
                continue
            found.append(checks.check(use, call, replayed.apply(use), ctx))
            if (c := found[-1]) is not None and c.diverges:
                counts[
                    f"{use.name}s of files the transcript never shows (expected to succeed: "
                    "the replay's tree lacks them, bench check says so)"
                ] += 1
            calls.append(call)
        text = step_text(step)
        ended_on_calls = bool(calls)
        if not calls:
            carried += [text] if text else []
            continue
        out: dict[str, Any] = {}
        if step.thinking:
            out["thinking"] = root("\n\n".join(step.thinking))
        if carried or text:
            out["text"] = root("\n\n".join([*carried, *([text] if text else [])]))
        carried = []
        out["tools"] = calls
        if (expect := checks.step_expect(found)) is not None:
            out["expect"] = expect
        steps.append(out)
    if not steps and not carried:
        return []
    if carried:
        final: dict[str, Any] = {"text": root("\n\n".join(carried))}
    elif turn.interrupted:
        final = {"text": INTERRUPTED_TEXT}
    elif ended_on_calls:
        counts["turns cut short (the transcript ends in their calls)"] += 1
        final = {"text": CUT_TEXT}
    else:
        final = {"text": NO_TEXT}
    last = turn.steps[-1]
    if not ended_on_calls and last.thinking:
        final = {"thinking": root("\n\n".join(last.thinking)), **final}
    return [*steps, final]


def _pause(prev: RecordedTurn, turn: RecordedTurn) -> float | None:
    if prev.end is None or turn.at is None:
        return None
    return round(max(0.0, (turn.at - prev.end).total_seconds()), 3)


def render_turns(
    session: RecordedSession, replayed: Replayed, ctx: checks.Context, counts: Counts
) -> list[dict[str, Any]]:
    """The scenario's ``turns``: turns whose every step was dropped are left out (and counted)."""
    root = Rooter(session.cwd)
    kept: list[tuple[RecordedTurn, list[dict[str, Any]]]] = []
    for turn in session.turns:
        steps = render_turn(turn, replayed, ctx, session.cwd, root, counts)
        if steps:
            kept.append((turn, steps))
        else:
            counts["turns with nothing to replay (dropped)"] += 1
    out: list[dict[str, Any]] = []
    for i, (turn, steps) in enumerate(kept):
        entry: dict[str, Any] = {"prompt": root(turn.prompt)}
        if i > 0 and (pause := _pause(kept[i - 1][0], turn)) is not None:
            entry["pause_s"] = pause
        entry["steps"] = steps
        nxt = kept[i + 1][0] if i + 1 < len(kept) else None
        entry["suggestion"] = root(nxt.prompt) if nxt is not None and nxt.source == ACCEPTED else None
        out.append(entry)
    return out
