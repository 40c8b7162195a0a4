"""What the simulated model says: match a request to a scenario, turn and step, and build the reply.

Matching (docs/scenarios.md): the scenario by its first turn's prompt; the turn by the sequence of user
prompts, each equal to the next turn's prompt or to the previous turn's suggestion (then the previous turn's
``suggestion_steps`` run), an unscripted prompt (a detour) answered by the fallback and the script picked up
at the next prompt equal to a remaining turn's; the step by the number of assistant messages after the last
prompt. A request whose last user message starts with the suggestion marker gets the suggestion of the turn just completed.
Everything is a pure function of the request and the seed, so a fork that replays a prefix gets exactly what
the real turn got.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from typing import Any

from speculate.prompts import SUGGESTION_MARKER
from speculate.sim.scenario import Scenario, Step

FALLBACK_PREFIX = "[simulator]"
_ROOT_RE = re.compile(r"^Working directory:[ \t]*(\S.*?)\s*$", re.MULTILINE)
_ID_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Reply:
    """The assistant content for one request, before usage and timing are attached."""

    content: list[dict[str, Any]]
    stop_reason: str
    source: str  # where it came from, for logs and tests: "scenario NAME turn T step S", "fallback: ..."
    timings: dict[str, float] | None = None  # recorded ttft_s / total_s (replayed traces only)

    @property
    def is_fallback(self) -> bool:
        return self.source.startswith("fallback")


@dataclass(frozen=True)
class Conversation:
    """The parts of a request that scripting looks at."""

    root: str | None
    prompts: tuple[str, ...]  # user messages carrying text (not just tool results), in order
    steps_done: int  # assistant messages after the last prompt
    suggestion_mode: bool


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    return system if isinstance(system, str) else "\n".join(_texts(system))


def project_root(body: dict[str, Any]) -> str | None:
    """The project root from the system prompt's ``Working directory:`` line."""
    match = _ROOT_RE.search(system_text(body))
    return match.group(1) if match else None


def conversation(body: dict[str, Any]) -> Conversation:
    prompts: list[str] = []
    steps_done = 0
    messages = list(body.get("messages") or [])
    suggestion_mode = False
    if messages and messages[-1].get("role") == "user":
        texts = _texts(messages[-1].get("content"))
        if any(t.lstrip().startswith(SUGGESTION_MARKER) for t in texts):
            suggestion_mode = True
            messages = messages[:-1]
    for message in messages:
        if message.get("role") == "assistant":
            steps_done += 1
            continue
        texts = [t for t in _texts(message.get("content")) if t.strip()]
        if texts:
            prompts.append("\n".join(texts).strip())
            steps_done = 0
    return Conversation(project_root(body), tuple(prompts), steps_done, suggestion_mode)


def substitute(value: Any, root: str | None) -> Any:
    """Replace ``{root}`` in every string of a scripted value."""
    if root is None:
        return value
    if isinstance(value, str):
        return value.replace("{root}", root)
    if isinstance(value, dict):
        return {k: substitute(v, root) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [substitute(v, root) for v in value]
    return value


def stable_id(prefix: str, *parts: object) -> str:
    """An id in the API's style, derived from ``parts`` so the same request gets the same ids."""
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    n = int.from_bytes(digest, "big")
    chars = []
    for _ in range(22):
        n, r = divmod(n, len(_ID_ALPHABET))
        chars.append(_ID_ALPHABET[r])
    return prefix + "01" + "".join(chars)


def fallback(reason: str) -> Reply:
    text = (
        f"{FALLBACK_PREFIX} No scripted response matches this request ({reason}). This answer comes from the "
        "embedded simulator, not a real model: it answers only the prompts its scenarios script "
        "(docs/scenarios.md), and picks the script up again at the next scripted prompt. To ask anything, "
        "use a real model: speculate repl DIR --model anthropic (ANTHROPIC_API_KEY, or --base-url)."
    )
    return Reply([{"type": "text", "text": text}], "end_turn", f"fallback: {reason}")


def next_turn(scenario: Scenario, last: int, prompt: str, root: str | None) -> tuple[int, bool] | None:
    """The turn ``prompt`` starts after turn ``last`` (-1: none yet), and whether via its suggestion."""
    turns = scenario.turns
    if last < 0:
        return (0, False) if substitute(turns[0].prompt, root) == prompt else None
    if last + 1 < len(turns) and substitute(turns[last + 1].prompt, root) == prompt:
        return last + 1, False
    suggestion = turns[last].suggestion
    if suggestion is not None and substitute(suggestion, root) == prompt:
        return last + 1, True
    for j in range(last + 2, len(turns)):  # resynchronise on a later turn
        if substitute(turns[j].prompt, root) == prompt:
            return j, False
    return None


@dataclass(frozen=True)
class _Position:
    scenario: Scenario
    turn: int
    via_suggestion: bool  # this turn's prompt was the previous turn's (differing) suggestion


class Script:
    """Scripted replies from a set of scenarios; stateless, so safe from many threads."""

    def __init__(self, scenarios: list[Scenario], *, seed: int = 0) -> None:
        self.scenarios = list(scenarios)
        self.seed = seed

    def _locate(self, conv: Conversation) -> _Position | str:
        """The scenario turn the last prompt belongs to, or the reason nothing matches.

        A scenario starts at the first prompt equal to its first turn's. After that, a prompt that is not
        scripted (a detour) gets the fallback, and the script resynchronises on the next prompt equal to any
        remaining turn's prompt (or to the last matched turn's suggestion), so one detour does not poison the
        rest of the session.
        """
        if not conv.prompts:
            return "the request has no user prompt"
        reason = ""
        for scenario in self.scenarios:
            where = self._follow(scenario, conv)
            if isinstance(where, _Position):
                return where
            reason = reason or where
        return reason or f"no scenario starts with the prompt {conv.prompts[0][:80]!r}"

    def _follow(self, scenario: Scenario, conv: Conversation) -> _Position | str:
        """Where the last prompt is in ``scenario``, or why it is off its script ("" if it never started)."""
        turns = scenario.turns
        last, via, on_script = -1, False, False
        for prompt in conv.prompts:
            step = next_turn(scenario, last, prompt, conv.root)
            on_script = step is not None
            if step is not None:
                last, via = step
        if last < 0:
            return ""
        if on_script:
            return _Position(scenario, last, via)
        n = len(conv.prompts)
        where = (f"the next scripted prompt is {substitute(turns[last + 1].prompt, conv.root)[:80]!r}"
                 if last + 1 < len(turns) else f"its {len(turns)} turns are done")
        return f"prompt {n} {conv.prompts[-1][:80]!r} is not in scenario {scenario.name!r}'s script; {where}"

    def reply(self, body: dict[str, Any]) -> Reply:
        conv = conversation(body)
        where = self._locate(conv)
        if isinstance(where, str) and conv.suggestion_mode:
            return Reply([], "end_turn", f"no suggestion: {where}")  # off script: nothing to predict
        if isinstance(where, str):
            return fallback(where)
        scenario, t = where.scenario, where.turn
        label = f"scenario {scenario.name!r} turn {t + 1}"
        if conv.suggestion_mode:
            suggestion = None if where.via_suggestion else scenario.turns[t].suggestion
            content = (
                [] if suggestion is None else [{"type": "text", "text": substitute(suggestion, conv.root)}]
            )
            return Reply(content, "end_turn", f"{label} suggestion")
        steps: tuple[Step, ...]
        if where.via_suggestion:
            steps = scenario.turns[t - 1].suggestion_steps or ()
            label += " (suggestion steps)"
        else:
            steps = scenario.turns[t].steps
        if conv.steps_done >= len(steps):
            return fallback(f"{label} has {len(steps)} steps and {conv.steps_done} were already taken")
        step = steps[conv.steps_done]
        content: list[dict[str, Any]] = []
        if step.text is not None:
            content.append({"type": "text", "text": substitute(step.text, conv.root)})
        for j, call in enumerate(step.tools):
            tool_id = stable_id("toolu_", self.seed, scenario.name, conv.prompts, conv.steps_done, j)
            content.append(
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": call.name,
                    "input": substitute(call.input, conv.root),
                }
            )
        return Reply(content, "tool_use" if step.tools else "end_turn", f"{label} step {conv.steps_done + 1}")
