"""Filters on a predicted prompt. Each rejection has a named reason, recorded in the event log.

The rules follow the anchors' published behaviour: 2 to 12 words (single words only from an allow-list of
things users really type), under 100 characters, one sentence, no formatting, not an evaluation of the
assistant's work, not in the assistant's voice, not meta text about suggesting, not an error message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SINGLE_WORDS = {
    "yes",
    "yeah",
    "yep",
    "ok",
    "okay",
    "sure",
    "no",
    "continue",
    "go",
    "push",
    "commit",
    "deploy",
    "proceed",
    "retry",
    "undo",
    "revert",
    "stop",
    "test",
    "tests",
    "lint",
    "build",
}
DONE = {"done", "nothing", "none", "n/a", "na", "no suggestion", "nothing else", "that's all", "thats all"}
MAX_WORDS = 12
MAX_CHARS = 100

_META = re.compile(
    r"\b(suggest(ion|ed)?|predict(ion|ed)?|the user (would|might|will)|next prompt|"
    r"user'?s? (next|likely))\b",
    re.I,
)
_ERROR = re.compile(
    r"^(error|exception|traceback|api error|failed to)\b|\b(rate limit|overloaded|"
    r"internal server error|status code \d{3})\b",
    re.I,
)
_LABEL = re.compile(r"^\s*(user|prompt|suggestion|next|answer|response)\s*:", re.I)
_FORMAT = re.compile(r"(^\s*([-*•>#]|\d+[.)])\s)|```|`|\*\*|__|\n|\[.+\]\(.+\)")
_EVALUATIVE = re.compile(
    r"^(great|thanks|thank you|perfect|awesome|nice|good job|well done|excellent|"
    r"looks good|lgtm|cool|amazing|wonderful)\b",
    re.I,
)
_ASSISTANT = re.compile(
    r"^(i'll|i will|i can|i've|i have|i'm|i am|let me|here's|here is|sure,|certainly|"
    r"would you like|do you want|shall i|should i)\b",
    re.I,
)
_SENTENCE_END = re.compile(r"[.!?](\s+|$)")


@dataclass(frozen=True)
class Verdict:
    ok: bool
    text: str  # the cleaned suggestion (quotes and surrounding space removed)
    reason: str = ""  # "" when ok


def clean(raw: str) -> str:
    t = raw.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'`":
        t = t[1:-1].strip()
    return t


def check(raw: str) -> Verdict:
    """Accept or reject a raw suggestion, naming the first rule it breaks."""
    t = clean(raw)
    low = t.lower().rstrip(".!")
    words = t.split()

    def no(reason: str) -> Verdict:
        return Verdict(False, t, reason)

    if not t:
        return no("empty")
    if len(t) > 4 * MAX_CHARS:  # cheap exit before the regexes on a runaway answer
        return no("too_long")
    if low in DONE:
        return no("done")
    if _LABEL.search(t):
        return no("prefixed_label")
    if _FORMAT.search(t):
        return no("formatting")
    if _META.search(t):
        return no("meta")
    if _ERROR.search(t):
        return no("error_text")
    if len(t) >= MAX_CHARS:
        return no("too_long")
    if len(words) > MAX_WORDS:
        return no("too_many_words")
    if len(words) < 2 and low not in SINGLE_WORDS:
        return no("too_few_words")
    if len(_SENTENCE_END.findall(t.rstrip(".!?") + ".")) > 1:
        return no("multiple_sentences")
    if _EVALUATIVE.search(t):
        return no("evaluative")
    if _ASSISTANT.search(t):
        return no("assistant_voice")
    return Verdict(True, t)


# A numbered or bulleted line of a top-K answer: the marker goes before the line is judged.
_LIST_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")


def check_many(raw: str, k: int) -> tuple[list[str], str]:
    """Top-K: each non-empty line judged on its own (a list marker stripped first), duplicates dropped; the
    first ``k`` that pass, most likely first, and the reason the first line failed when none passes."""
    passed: list[str] = []
    reason = ""
    for line in raw.splitlines():
        if not line.strip():
            continue
        verdict = check(_LIST_MARKER.sub("", line, count=1))
        if not verdict.ok:
            reason = reason or verdict.reason
        elif verdict.text not in passed:
            passed.append(verdict.text)
        if len(passed) == k:
            break
    return passed, ("" if passed else reason or "empty")
