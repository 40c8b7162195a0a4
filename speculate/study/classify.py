"""What the person did with the suggestion shown, and the suggestion's length bucket and first word.

- ``taken``: the prompt sent is the suggestion exactly (the engine's own test for using the speculation),
  whether it came by Tab or was typed.
- ``edited``: not exactly it, but built from it: the ghost text was taken (Tab, or Right) and the line then
  changed, keeping a similarity of at least :data:`TAB_EDIT_SIMILARITY` (below that the line was cleared and
  something else written: ignored); or typed without Tab with a similarity of at least
  :data:`TYPED_EDIT_SIMILARITY`. Similarity is :class:`difflib.SequenceMatcher`'s ratio (2·matches / total
  length) on both texts casefolded with whitespace collapsed: "run the CLI to check page 2" → "… page 3" is
  0.96, "fix it and add a regression test" → "fix it and add a test" 0.79, an unrelated prompt about 0.3.
- ``ignored``: a suggestion was shown and the prompt is neither.
- ``none``: no suggestion was shown (none was made, or the arm shows none).

An edited suggestion does not use the speculation (the engine needs the exact text); the share of edited
turns is what a fuzzier match could add.
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

Taken = Literal["taken", "edited", "ignored", "none"]
TAB_EDIT_SIMILARITY = 0.5
TYPED_EDIT_SIMILARITY = 0.75
LENGTH_BUCKETS = ((1, 3), (4, 6), (7, 9), (10, None))  # words, inclusive; None: no upper end
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w[\w'-]*")


def normalize(text: str) -> str:
    return _SPACE.sub(" ", text.casefold()).strip()


def similarity(a: str, b: str) -> float:
    """SequenceMatcher's ratio of the normalised texts (1.0 when both are empty)."""
    return difflib.SequenceMatcher(None, normalize(a), normalize(b), autojunk=False).ratio()


def classify(suggestion: str | None, prompt: str, *, took_ghost: bool) -> tuple[Taken, float | None]:
    """(what was done with ``suggestion``, the similarity of ``prompt`` to it); ``took_ghost``: Tab (or Right)
    took the ghost text at some point before the prompt was sent."""
    if suggestion is None:
        return "none", None
    if prompt == suggestion:
        return "taken", 1.0
    sim = similarity(suggestion, prompt)
    if sim >= (TAB_EDIT_SIMILARITY if took_ghost else TYPED_EDIT_SIMILARITY):
        return "edited", sim
    return "ignored", sim


def length_bucket(text: str) -> str:
    """``1-3``, ``4-6``, ``7-9`` or ``10+`` words (``0`` for a suggestion with none)."""
    n = len(text.split())
    for lo, hi in LENGTH_BUCKETS:
        if n >= lo and (hi is None or n <= hi):
            return f"{lo}-{hi}" if hi is not None else f"{lo}+"
    return "0"


def first_word(text: str) -> str:
    """The first word, casefolded, without punctuation ("" when there is none)."""
    m = _WORD.search(text.casefold())
    return m.group(0) if m else ""
