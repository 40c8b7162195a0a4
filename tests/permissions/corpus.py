"""The whole corpus: every configuration of :mod:`.corpus_shell` and :mod:`.corpus_files`, with the checks
that keep it usable (unique names and keys, every category present)."""

from __future__ import annotations

from collections.abc import Iterator

from .cases import CATEGORIES, Call, Config
from .corpus_files import bare_rules, case, hooks, modes, sensitive_files, settings
from .corpus_shell import allow_overreach, default_readonly, deny_evasion, file_rules_in_bash


def configurations(category: str | None = None) -> list[Config]:
    """Every configuration, or those of one category, in a fixed order."""
    out = [
        *deny_evasion(),
        *allow_overreach(),
        *sensitive_files(),
        *file_rules_in_bash(),
        *case(),
        *default_readonly(),
        *modes(),
        *bare_rules(),
        *settings(),
        *hooks(),
    ]
    names = [c.name for c in out]
    assert len(names) == len(set(names)), "two configurations share a name"
    assert {c.category for c in out} <= set(CATEGORIES)
    return [c for c in out if category is None or c.category == category]


def calls(category: str | None = None) -> Iterator[tuple[str, Config, Call]]:
    """(key, configuration, call) for every call."""
    for cfg in configurations(category):
        for call in cfg.calls:
            yield cfg.key(call), cfg, call
