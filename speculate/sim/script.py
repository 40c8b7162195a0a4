"""What the simulated model says: match a request to a scenario, turn and step, and build the reply.

Matching (docs/scenarios.md): the scenario by its first turn's prompt; the turn by the sequence of user
prompts, each equal to the next turn's prompt or to one of the previous turn's candidate suggestions (then
that candidate's steps run), an unscripted prompt (a detour) answered by the fallback and the script picked
up at the next prompt equal to a remaining turn's; the step by the number of assistant messages after the
last prompt. Prompts are the user's own words as :mod:`.clients` reads them from any client; a request asking
for a suggestion gets the suggestion of the turn just completed. Tool calls are rendered for the client's own
tools (:mod:`.intents`).
Everything is a pure function of the request and the seed, so a fork that replays a prefix gets exactly what
the real turn got. A compaction request gets a summary listing the prompts so far, which the continued
conversation carries (so the scenario goes on after a compaction).
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from typing import Any

from speculate.sim.clients import (
    DEFAULT_CONVENTIONS,
    ClientConventions,
    Conversation,
    normalize_prompt,
    tools_in_text,
)
from speculate.sim.clients import read_conversation as _read
from speculate.sim.draw import draw_candidates, draw_suggestion
from speculate.sim.intents import RenderError, render
from speculate.sim.scenario import Candidate, Scenario, Step, Turn

FALLBACK_PREFIX = "[simulator]"
_ID_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Reply:
    """The assistant content for one request, before usage and timing are attached."""

    content: list[dict[str, Any]]
    stop_reason: str
    source: str  # where it came from, for logs and tests: "scenario NAME turn T step S", "fallback: ..."
    timings: dict[str, float] | None = None  # recorded ttft_s / total_s (replayed traces only)
    stop_sequence: str | None = None

    @property
    def is_fallback(self) -> bool:
        return self.source.startswith("fallback")


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


DENIED_NOTE = (
    "A call was not run; the script goes on with its next calls, without its words about that call's result"
)


def off_script(label: str, denied: str) -> Reply:
    """The answer to a turn whose call was refused: the script's next step would report that call's result
    (a test run's "all passed"), which never happened, so the simulator says so instead; the script picks
    up again at the next scripted prompt."""
    text = (
        f"{FALLBACK_PREFIX} The call was not run ({denied}), so this turn is off its script: the scripted "
        "answer reports that call's result. This answer comes from the embedded simulator, not a real model; "
        "the script picks up again at the next scripted prompt."
    )
    return Reply(
        [{"type": "text", "text": text}], "end_turn", f"fallback: off script after a refused call in {label}"
    )


def compaction_summary(conv: Conversation, *, tagged: bool = False) -> Reply:
    """The simulated summary of a conversation: its prompts in words, and as JSON that the simulator reads
    back from the continuation message (clients.SIM_PROMPTS_RE), so that the scenario goes on after it.
    ``tagged``: in the <analysis>/<summary> blocks a request asked for (Claude Code's /compact keeps the
    summary block)."""
    lines = "\n".join(f"{i}. {p}" for i, p in enumerate(conv.prompts, start=1)) or "(none)"
    text = (
        f"Summary of the conversation so far (simulated). The user asked, in order:\n{lines}\n"
        f"<sim-prompts>{json.dumps(list(conv.prompts))}</sim-prompts>"
    )
    if tagged:
        text = f"<analysis>\nThe simulator lists the prompts.\n</analysis>\n\n<summary>\n{text}\n</summary>"
    return Reply(
        [{"type": "text", "text": text}], "end_turn", f"compaction summary of {len(conv.prompts)} prompts"
    )


def as_text(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reply of a ``tool_calls: text`` scenario: one text block, each call a <tool_use> JSON block."""
    parts = []
    for b in content:
        if b["type"] == "text":
            parts.append(b["text"])
        elif b["type"] == "tool_use":
            call = {"name": b["name"], "id": b["id"], "input": b["input"]}
            parts.append(f"<tool_use>\n{json.dumps(call)}\n</tool_use>")
    return [{"type": "text", "text": "\n".join(parts)}]


def same_prompt(scripted: str, prompt: str, root: str | None) -> bool:
    """Whether a scripted prompt (with ``{root}``) is the user's ``prompt``, both as the matcher reads them."""
    return normalize_prompt(substitute(scripted, root), root) == normalize_prompt(prompt, root)


def taken_candidate(turn: Turn, prompt: str, root: str | None) -> Candidate | None:
    """The candidate suggestion of ``turn`` that ``prompt`` is (the user took a suggestion)."""
    return next((c for c in turn.options if c.text is not None and same_prompt(c.text, prompt, root)), None)


def next_turn(scenario: Scenario, last: int, prompt: str, root: str | None) -> tuple[int, bool] | None:
    """The turn ``prompt`` starts after turn ``last`` (-1: none yet), and whether via a suggestion."""
    turns = scenario.turns
    if last < 0:
        return (0, False) if same_prompt(turns[0].prompt, prompt, root) else None
    if last + 1 < len(turns) and same_prompt(turns[last + 1].prompt, prompt, root):
        return last + 1, False
    if taken_candidate(turns[last], prompt, root) is not None:
        return last + 1, True
    for j in range(last + 2, len(turns)):  # resynchronise on a later turn
        if same_prompt(turns[j].prompt, prompt, root):
            return j, False
    return None


@dataclass(frozen=True)
class _Position:
    scenario: Scenario
    turn: int
    via_suggestion: bool  # this turn's prompt was the previous turn's (differing) suggestion


class Script:
    """Scripted replies from a set of scenarios; stateless, so safe from many threads."""

    def __init__(
        self,
        scenarios: list[Scenario],
        *,
        seed: int = 0,
        hit_rate: float | None = None,
        conventions: ClientConventions = DEFAULT_CONVENTIONS,
    ) -> None:
        if hit_rate is not None and not 0.0 <= hit_rate <= 1.0:
            raise ValueError(f"hit rate {hit_rate:g}: must be between 0 and 1")
        self.scenarios = list(scenarios)
        self.seed = seed
        self.hit_rate = hit_rate  # forced share of suggestions that are the next intent (speculate.sim.draw)
        self.conventions = conventions

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
        where = (
            f"the next scripted prompt is {substitute(turns[last + 1].prompt, conv.root)[:80]!r}"
            if last + 1 < len(turns)
            else f"its {len(turns)} turns are done"
        )
        return f"prompt {n} {conv.prompts[-1][:80]!r} is not in scenario {scenario.name!r}'s script; {where}"

    def reply(self, body: dict[str, Any]) -> Reply:
        conv = _read(body, self.conventions)
        if conv.compaction_mode:
            return compaction_summary(
                conv, tagged="<summary>" in json.dumps(body.get("messages") or [])[-20_000:]
            )
        where = self._locate(conv)
        if isinstance(where, str) and conv.suggestion_mode:
            return Reply([], "end_turn", f"no suggestion: {where}")  # off script: nothing to predict
        if isinstance(where, str):
            return fallback(where)
        scenario, t = where.scenario, where.turn
        label = f"scenario {scenario.name!r} turn {t + 1}"
        if conv.suggestion_mode:
            if conv.suggestion_count > 1:  # top-K: the scenario's candidates, by weight, one per line
                texts = (
                    []
                    if where.via_suggestion
                    else [
                        c.text
                        for c in draw_candidates(
                            scenario, t, seed=self.seed, k=conv.suggestion_count, hit_rate=self.hit_rate
                        )
                        if c.text
                    ]
                )
                suggestion = "\n".join(texts) or None
            else:
                suggestion = (
                    None
                    if where.via_suggestion
                    else draw_suggestion(scenario, t, seed=self.seed, hit_rate=self.hit_rate).text
                )
            content: list[dict[str, Any]] = (
                [] if suggestion is None else [{"type": "text", "text": substitute(suggestion, conv.root)}]
            )
            return Reply(content, "end_turn", f"{label} suggestion")
        steps: tuple[Step, ...]
        if where.via_suggestion:
            cand = taken_candidate(scenario.turns[t - 1], conv.prompts[-1], conv.root)
            steps = (cand.steps if cand is not None else None) or ()
            label += " (suggestion steps)"
        else:
            steps = scenario.turns[t].steps
        if conv.denied and (conv.steps_done >= len(steps) or not steps[conv.steps_done].tools):
            # The script's answer would report what a refused call did: it did nothing. Further calls go on
            # as scripted (they claim no result, and a model may well try the next thing).
            return off_script(label, conv.denied)
        if conv.steps_done >= len(steps):
            return fallback(f"{label} has {len(steps)} steps and {conv.steps_done} were already taken")
        step = steps[conv.steps_done]
        content = []
        if step.thinking is not None:  # kept or dropped by the request's thinking setting (shaping.py)
            content.append({"type": "thinking", "thinking": substitute(step.thinking, conv.root)})
        if conv.denied:  # its words may report the refused call's result (a test run's "1 failed"): not said
            content = [{"type": "text", "text": f"{FALLBACK_PREFIX} {DENIED_NOTE} ({conv.denied})"}]
        elif step.text is not None:
            content.append({"type": "text", "text": substitute(step.text, conv.root)})
        label += f" step {conv.steps_done + 1}"
        # Text tool calling (our <tools> protocol, the claude-cli backend) is read from the request: a client
        # that sends no API tools but a <tools> block gets <tool_use> text, whatever the scenario says.
        in_text = tools_in_text(body) if not conv.tools else None
        as_text_reply = scenario.tool_calls == "text" or in_text is not None
        tools = in_text if in_text is not None else conv.tools
        for j, call in enumerate(step.tools):
            tool_id = stable_id("toolu_", self.seed, scenario.name, conv.prompts, conv.steps_done, j)
            try:
                name, inp = render(call.name, substitute(call.input, conv.root), tools)
            except RenderError as exc:
                return fallback(f"{label}: {exc}")
            content.append({"type": "tool_use", "id": tool_id, "name": name, "input": inp})
        if as_text_reply:
            return Reply(as_text(content), "end_turn", label)
        return Reply(content, "tool_use" if step.tools else "end_turn", label)
