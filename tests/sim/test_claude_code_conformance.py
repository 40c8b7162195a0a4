"""Claude Code as the oracle: the same project (settings with rules and hooks, CLAUDE.md, an MCP server) under
``claude -p`` and under speculate, on the same simulator; every case of the comparison
(tests/sim/conformance.py) is the same, or an intended difference that docs/claude-code.md lists with its
reason. Skipped, with the reason, where scripts/setup.sh could not install the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.sim.claude_code import ClaudeCode

from .conformance import run_claude_code, run_speculate
from .conformance_compare import compare, table

# Intended differences (docs/claude-code.md, "Claude Code as the oracle"): case -> why.
INTENDED = {
    "environment: only one side's": "Claude Code's own plumbing (its messaging socket, child-session notes, "
    "CLAUDE_ENV_FILE, effort); speculate's commands run with PAGER=cat",
    "stdin fields only Claude Code sends": "effort, background tasks and crons: speculate has none of them",
}


@pytest.mark.slow
def test_claude_code_and_speculate_agree_on_hooks_rules_instructions_and_mcp(tmp_path: Path) -> None:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    cc = run_claude_code(tmp_path / "claude-code", binary)
    assert cc.notes == []  # every turn exited 0
    sp = run_speculate(tmp_path / "speculate")
    rows = compare(cc, sp)
    print("\n" + table(rows, INTENDED))  # the figure in docs/claude-code.md (pytest -s shows it)
    different = [case for case, a, b in rows if a != b]
    assert sorted(different) == sorted(INTENDED), table([r for r in rows if r[0] in different], INTENDED)
    # The rows that must agree do, on something: not two empty logs.
    assert len(cc.hooks) > 20 and len(sp.hooks) > 20
