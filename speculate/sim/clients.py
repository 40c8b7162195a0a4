"""Reading a request the way any client writes it: the user's own prompts, the project root, the client's
tools, and whether the request asks for a prompt suggestion.

Clients wrap the user's words in their own material: Claude Code puts ``<system-reminder>`` blocks (context
files, attribution notes, hook output) before the prompt and a ``role: "system"`` message after it; our agent
writes the root as ``Working directory: ...``, Claude Code as `` - Primary working directory: ...``. The
conventions below are regular expressions, all configurable (:class:`ClientConventions`), with defaults that
cover both clients and a few others' known forms. Prompts are compared after normalising whitespace, dates
and absolute paths, so a scenario written or recorded on one day in one checkout matches on another.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

# Spans a client injects into user messages; removed before the prompt is read.
DEFAULT_INJECTED = (
    r"<(system-reminder|user-prompt-submit-hook|command-name|command-message|command-args|local-command-caveat|"
    r"local-command-stdout|local-command-stderr|environment_context|user_instructions|tool_result|"
    r"bash-input|bash-stdout|bash-stderr)>.*?</\1>",  # the last three: Claude Code's bash mode (!cmd)
)
# Tags around the user's own words (text-based tool calling wraps them in <user>); removed, words kept.
DEFAULT_WRAPPERS = (r"</?user>",)
# Lines naming the working directory; group 1 is the path. Searched in the system prompt, system-role
# messages, then user messages (injected blocks included).
DEFAULT_ROOT_PATTERNS = (
    r"^[ \t]*(?:-[ \t]*)?(?:Primary )?[Ww]orking directory:[ \t]*(\S[^\n]*?)[ \t]*$",  # ours, Claude Code
    r"<cwd>\s*(\S[^<]*?)\s*</cwd>",  # Codex's environment context
    r"working in the directory:?[ \t]*(\S[^\n]*?)[ \t]*$",  # Gemini CLI's setup message
)
# A compaction request (summarise the conversation so far): our marker, and Claude Code's wordings (its
# /compact request, 2.1.332, opens "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools." and asks for
# the summary a few lines further down).
DEFAULT_COMPACTION_PATTERNS = (
    r"^\s*\[COMPACTION\b",
    r"^\s*CRITICAL: Respond with TEXT ONLY\b",
    r"(?m)^\s*Your task is to create a detailed summary of the conversation so far",
)
# A text block that continues a compacted conversation: it carries the summary, not a prompt. The
# simulator's summaries list the earlier prompts in a <sim-prompts> JSON array, read back from here.
DEFAULT_CONTINUATION = r"^\s*This session is being continued from a previous conversation"
SIM_PROMPTS_RE = re.compile(r"<sim-prompts>(.*?)</sim-prompts>", re.DOTALL)
# What a client appends to the summary in a continuation: not the user's words (Claude Code 2.1.332's lines).
DEFAULT_CONTINUATION_NOTES = (
    r"(?m)^If you need specific details from before compaction\b.*$",
    r"(?m)^Continue the conversation from where it left off\b.*$",
)
# A suggestion request is recognised by what it asks, not by one literal marker.
DEFAULT_SUGGESTION_PATTERNS = (
    r"^\s*\[SUGGESTION MODE\b",
    r"\b(?:suggest|predict)\b[^\n]{0,80}?\b(?:user|they)\b[^\n]{0,60}?\b(?:type|say|ask|write|enter)\b"
    r"[^\n]{0,40}?\bnext\b",
)

_DATE_RE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"
    r"|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]* \d{4}\b"
    r"|\b\d{1,2}/\d{1,2}/\d{4}\b"
)
# An absolute path: a slash not preceded by a word, URL or placeholder character, then path components.
_PATH_RE = re.compile(r"(?<![\w.~}/:<\\])/(?:[\w.@%+=,-]+/)*[\w.@%+=,-]*")


@dataclass(frozen=True, kw_only=True)
class ClientConventions:
    """How the simulator reads client requests (regular expressions, all replaceable)."""

    injected: Sequence[str] = DEFAULT_INJECTED
    wrappers: Sequence[str] = DEFAULT_WRAPPERS
    root_patterns: Sequence[str] = DEFAULT_ROOT_PATTERNS
    suggestion_patterns: Sequence[str] = DEFAULT_SUGGESTION_PATTERNS
    compaction_patterns: Sequence[str] = DEFAULT_COMPACTION_PATTERNS
    continuation: str = DEFAULT_CONTINUATION
    continuation_notes: Sequence[str] = DEFAULT_CONTINUATION_NOTES

    def __post_init__(self) -> None:
        for what in (
            "injected",
            "wrappers",
            "root_patterns",
            "suggestion_patterns",
            "compaction_patterns",
            "continuation_notes",
        ):
            for pattern in getattr(self, what):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(
                        f"ClientConventions.{what}: invalid regular expression {pattern!r}: {exc}"
                    ) from None

    @cached_property
    def _injected(self) -> list[re.Pattern[str]]:
        return [re.compile(p, re.DOTALL) for p in self.injected]

    @cached_property
    def _roots(self) -> list[re.Pattern[str]]:
        return [re.compile(p, re.MULTILINE) for p in self.root_patterns]

    @cached_property
    def _suggestion(self) -> list[re.Pattern[str]]:
        return [re.compile(p, re.IGNORECASE) for p in self.suggestion_patterns]

    def own_text(self, text: str) -> str:
        """``text`` without the spans the client injected."""
        for pattern in self._injected:
            text = pattern.sub("", text)
        for wrapper in self.wrappers:
            text = re.sub(wrapper, "", text)
        return text.strip()

    @cached_property
    def _compaction(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.compaction_patterns]

    def is_suggestion_request(self, text: str) -> bool:
        return any(p.search(text) for p in self._suggestion)

    def is_compaction_request(self, text: str) -> bool:
        return any(p.search(text) for p in self._compaction)

    def continued_prompts(self, text: str) -> tuple[list[str], str] | None:
        """The earlier prompts a continuation carries ([] if it lists none) and the text after its prompt list
        (a client that sends the next prompt in the same block), or None: ``text`` is not a continuation."""
        if not re.match(self.continuation, text):
            return None
        found = SIM_PROMPTS_RE.search(text)
        if found is None:
            return [], ""
        try:
            prompts = json.loads(found.group(1))
        except ValueError:
            prompts = []
        rest = text[found.end() :]
        for note in self.continuation_notes:
            rest = re.sub(note, "", rest)
        if "</summary>" in rest:  # the summary block our prompt list sits in
            rest = rest.split("</summary>", 1)[1]
        return [p for p in prompts if isinstance(p, str)] if isinstance(prompts, list) else [], rest

    def find_root(self, texts: Sequence[str]) -> str | None:
        for pattern in self._roots:
            for text in texts:
                match = pattern.search(text)
                if match:
                    return match.group(1).rstrip("/") or "/"
        return None


DEFAULT_CONVENTIONS = ClientConventions()


def texts_of(content: Any) -> list[str]:
    """The text of a message's text blocks (a string content is one block)."""
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    return system if isinstance(system, str) else "\n".join(texts_of(system))


def project_root(body: dict[str, Any], conventions: ClientConventions = DEFAULT_CONVENTIONS) -> str | None:
    """The working directory the client declares, wherever it writes it."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system_msgs = ["\n".join(texts_of(m.get("content"))) for m in messages if m.get("role") == "system"]
    user_msgs = ["\n".join(texts_of(m.get("content"))) for m in messages if m.get("role") == "user"]
    return conventions.find_root([system_text(body), *system_msgs, *user_msgs])


def normalize_dates(text: str) -> str:
    return _DATE_RE.sub("{date}", text)


def normalize_prompt(text: str, root: str | None) -> str:
    """A prompt as the matcher compares it: the root as ``{root}``, other absolute paths (and paths under
    the root) by their last component, dates as ``{date}``, whitespace collapsed."""
    if root and root != "/":
        text = text.replace(root, "{root}")

    def path(m: re.Match[str]) -> str:
        name = m.group(0).rstrip("/").rsplit("/", 1)[-1]
        return "{path}/" + name

    text = re.sub(r"\{root\}/[^\s'\"`)]*", path, text)
    text = _PATH_RE.sub(lambda m: path(m) if len(m.group(0)) > 1 else m.group(0), text)
    return " ".join(normalize_dates(text).split())


@dataclass(frozen=True)
class Conversation:
    """The parts of a request that scripting looks at."""

    root: str | None
    prompts: tuple[str, ...]  # the user's own words, one per user message that has any, normalised
    steps_done: int  # assistant messages after the last prompt
    suggestion_mode: bool
    tools: tuple[dict[str, Any], ...] | None = field(default=None)  # the client's tool definitions, if sent
    compaction_mode: bool = False  # the request asks for a summary of the conversation
    suggestion_count: int = 1  # a suggestion request asking for "up to K alternatives" (top-K speculation)
    denied: str = ""  # a call of this turn that the person (or a rule) refused: its result's first line


# A tool result saying the call was refused, not run: ours ("Permission denied: ..."), Claude Code's ("The
# user doesn't want to proceed with this tool use", "Permission to use Bash ... has been denied", "File is in
# a directory that is denied by your permission settings", and under -p an unanswered question: "Claude
# requested permissions to ..., but you haven't granted it yet", "This command requires approval").
_DENIED_RE = re.compile(
    r"permission denied|doesn't want to proceed|has been denied|was rejected|denied by your permission settings"
    r"|haven't granted it yet|requires approval",
    re.I,
)


def denied_call(message: Any) -> str:
    """The first refused call's result in a user message (its first line), or ""."""
    content = message.get("content") if isinstance(message, dict) else None
    for b in content if isinstance(content, list) else []:
        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error"):
            c = b.get("content")
            text = c if isinstance(c, str) else "\n".join(texts_of(c))
            if _DENIED_RE.search(text):
                return text.strip().splitlines()[0][:200] if text.strip() else "denied"
    return ""


# A suggestion request asking for several candidates, one per line (speculate.prompts.suggestion_instruction).
_SUGGESTION_COUNT_RE = re.compile(
    r"\bup to (\d{1,2}) (?:alternatives|candidates|suggestions|predictions)\b", re.I
)
_TOOLS_TEXT_RE = re.compile(r"<tools>\s*(\[.*?\])\s*</tools>", re.DOTALL)
# A text-tool-calling client that starts a fresh session on an existing conversation sends all of it as one
# prompt, earlier answers in <assistant> tags (speculate.models.text_tools.render).
_INLINE_ASSISTANT_RE = re.compile(r"<assistant>\n?(.*?)\n?</assistant>", re.DOTALL)


def split_inline(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every user text holding ``<assistant>`` spans split into the turns it stands for."""
    out: list[dict[str, Any]] = []
    for m in messages:
        texts = texts_of(m.get("content")) if m.get("role") == "user" else []
        if not any("<assistant>" in t for t in texts):
            out.append(m)
            continue
        pieces = _INLINE_ASSISTANT_RE.split("\n".join(texts))  # user, assistant, user, ...
        for i, piece in enumerate(pieces):
            role = "assistant" if i % 2 else "user"
            if role == "assistant" or piece.strip():
                out.append({"role": role, "content": [{"type": "text", "text": piece}]})
    return out


def tools_in_text(body: dict[str, Any]) -> tuple[dict[str, Any], ...] | None:
    """Tool definitions a text-based client sends as a JSON array in a ``<tools>`` block (first found)."""
    for m in body.get("messages") or []:
        for t in texts_of(m.get("content")) if isinstance(m, dict) else []:
            found = _TOOLS_TEXT_RE.search(t)
            if found:
                try:
                    tools = json.loads(found.group(1))
                except ValueError:
                    return None
                return tuple(x for x in tools if isinstance(x, dict))
    return None


def read_conversation(
    body: dict[str, Any], conventions: ClientConventions = DEFAULT_CONVENTIONS
) -> Conversation:
    root = project_root(body, conventions)
    messages = split_inline(
        [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") != "system"]
    )
    suggestion_mode = compaction_mode = False
    count = 1
    if messages and messages[-1].get("role") == "user":
        blocks = texts_of(messages[-1].get("content"))
        last = "\n".join(blocks)
        if conventions.is_suggestion_request(conventions.own_text(last) or last):
            suggestion_mode = True
            asked = _SUGGESTION_COUNT_RE.search(last)
            count = max(1, int(asked.group(1))) if asked else 1
            messages = messages[:-1]
        elif blocks and conventions.is_compaction_request(conventions.own_text(blocks[-1]) or blocks[-1]):
            compaction_mode = True  # the instruction is the last block (it may join an interrupted turn)
            content = messages[-1].get("content")
            rest = [b for b in content if b is not content[-1]] if isinstance(content, list) else []
            messages = [*messages[:-1], {"role": "user", "content": rest}] if rest else messages[:-1]
    prompts: list[str] = []
    steps_done = 0
    denied = ""  # the first refused call of the current turn (since its prompt)
    for message in messages:
        if message.get("role") == "assistant":
            steps_done += 1
            continue
        denied = denied or (denied_call(message) if steps_done else "")
        own = []
        for t in texts_of(message.get("content")):
            mine = conventions.own_text(t)
            continued = conventions.continued_prompts(mine)
            if continued is None:
                own.append(mine)
            else:
                prompts.extend(normalize_prompt(p, root) for p in continued[0])
                own.append(continued[1].strip())
        text = "\n".join(t for t in own if t)
        if text:
            prompts.append(normalize_prompt(text, root))
            steps_done, denied = 0, ""
    tools = body.get("tools")
    return Conversation(root, tuple(prompts), steps_done, suggestion_mode,
                        tuple(tools) if isinstance(tools, list) else None, compaction_mode, count,
                        denied)  # fmt: skip
