"""The permission corpus under Claude Code 2.1.332 and under speculate's live gate (slow; skipped with the
reason where scripts/setup.sh could not install the CLI): at least 500 calls compared, none where speculate
is looser, and every call where it is stricter listed below with its reason (mirrored in docs/claude-code.md,
"The permission corpus")."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.sim.claude_code import ClaudeCode

from .corpus import configurations
from .differential import run

# Calls where speculate is stricter than Claude Code on purpose: key ("config#label") -> why. Mirrored in
# docs/claude-code.md ("The permission corpus"); an entry that is no longer stricter fails the test too.
PLAN = (
    "plan mode refuses a change outright; Claude Code's refusal (`Cannot write to … while in plan mode.`) "
    "names no rule or hook, so the corpus reads it as an ask"
)
INTENDED_STRICTER: dict[str, str] = {
    "mode-plan#Write {root}/new-w.txt": PLAN,
    "mode-plan#Write {side}/new-out.txt": PLAN,
    "mode-plan#Edit {root}/a.txt": PLAN,
    "defaultMode-plan#Write {root}/dm-w.txt": PLAN,
    "defaultMode-plan#Edit {root}/a.txt": PLAN,
}


@pytest.mark.slow
def test_speculate_is_never_looser_than_claude_code(tmp_path: Path) -> None:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    result = run(configurations(), tmp_path, binary)
    print("\n" + result.report(INTENDED_STRICTER))  # pytest -s shows it: the figure in docs/claude-code.md
    compared = [r for r in result.records if r.verdict != "incomparable"]
    assert len(compared) >= 500
    looser = [r.key for r in result.records if r.verdict == "looser"]
    assert looser == [], f"{len(looser)} calls where speculate is looser: {looser[:20]}"
    unlisted = [r.key for r in result.records if r.verdict == "stricter" and r.key not in INTENDED_STRICTER]
    assert unlisted == [], f"{len(unlisted)} stricter calls not in INTENDED_STRICTER: {unlisted[:20]}"
    stale = sorted(INTENDED_STRICTER.keys() - {r.key for r in result.records if r.verdict == "stricter"})
    assert stale == [], f"listed as stricter but no longer are: {stale}"
