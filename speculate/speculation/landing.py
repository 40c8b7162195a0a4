"""Whether a taken suggestion's fork will land (issue #36): the boundary a suggestion predicts and the
P(lands | accept) estimate the policy (:mod:`speculate.speculation.policy`) multiplies into P(accept).

A fork that stops at a protected path (a commit writes ``.git/``) or conflicts saves the user nothing even
when they take the suggestion. :func:`boundary_of` predicts that from the suggestion's text; the estimate
learns from earlier taken forks whether their work landed, keyed coarse to fine on that boundary, the first
word and the length (:meth:`Features.land_keys <speculate.speculation.policy.Features.land_keys>`), with
partial pooling as the P(accept) estimate does and a prior per boundary (:data:`LAND_PRIOR`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

LAND_PRIOR = {"none": (4.0, 1.0), "protected": (1.0, 4.0)}  # Beta(a, b) of P(lands | accept) by boundary
# Words naming what a fork cannot land: a commit, a push, a pull request, history rewriting, a release.
_PROTECTED_WORDS = re.compile(r"\b(commit|commits|committing|push|pushes|pull request|pr|rebase|amend)\b")
_GIT_WRITES = {
    "commit",
    "push",
    "add",
    "tag",
    "merge",
    "rebase",
    "am",
    "cherry-pick",
    "reset",
    "stash",
    "amend",
}
_SHELL_FIRST = {"git", "gh", "rm", "mv", "cp", "touch", "mkdir", "sed", "echo", "cat", "npm", "make"}
_PROTECTED_DIRS = ("/.git/", "/.claude/")


def boundary_of(text: str) -> str:
    """The boundary a fork of ``text`` is predicted to stop at before landing: ``protected`` (a commit, a
    push, a write under ``.git/`` or ``.claude/``: never landed by a speculation) or ``none``. A command the
    suggestion spells out (in backticks, or the whole text when it starts with a command name) is read with
    the shell parser's facts; otherwise the words are."""
    low = text.lower()
    commands = re.findall(r"`([^`]+)`", text)
    if low.split(" ", 1)[0] in _SHELL_FIRST:
        commands.append(text)
    for cmd in commands:
        if _command_is_protected(cmd):
            return "protected"
    return "protected" if _PROTECTED_WORDS.search(low) else "none"


def _command_is_protected(cmd: str) -> bool:
    from speculate.shell.facts import analyze

    try:
        facts = analyze(cmd, cwd="/project", home="/home/user")
    except Exception:  # a suggestion is prose: an unparsable one is read by its words instead
        return False
    for c in facts.commands:
        argv = [a for a in c.argv if a is not None]
        if argv[:1] == ["gh"] or (argv[:1] == ["git"] and any(a in _GIT_WRITES for a in argv[1:3])):
            return True
    return any(p is not None and any(d in p + "/" for d in _PROTECTED_DIRS) for p, _ in facts.writes)


@dataclass
class LandBackoff:
    """Beta-Binomial counts of taken forks that landed, per key, partially pooled from coarse to fine; the
    coarsest key (``boundary=...``) starts from that boundary's prior."""

    priors: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(LAND_PRIOR))
    pooling: float = 2.0
    counts: dict[str, list[int]] = field(default_factory=dict)  # key -> [landed, did not land]

    def p_land(self, keys: Sequence[str]) -> float:
        a, b = self.priors.get(keys[0].partition("=")[2], LAND_PRIOR["none"])
        s, f = self.counts.get(keys[0], (0, 0))
        p = (a + s) / (a + b + s + f)
        for key in keys[1:]:
            s, f = self.counts.get(key, (0, 0))
            p = (self.pooling * p + s) / (self.pooling + s + f) if self.pooling + s + f > 0 else p
        return p if math.isfinite(p) else 0.0

    def observe(self, keys: Sequence[str], landed: bool) -> None:
        for key in keys:
            c = self.counts.setdefault(key, [0, 0])
            c[0 if landed else 1] += 1
