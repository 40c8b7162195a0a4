"""``speculate sim check SCENARIO.yaml``: validate scenario files, as the simulator reads them.

Format errors are reported as ``file:line: reason`` (exit status 2); a valid file gets one line with its
name, its turns, its tool-result expectations and its workspace. Replaying a scenario through the real
agent loop and tools is the benchmark's job (``speculate bench check``, :mod:`bench.check`): it needs the
benchmark's harness and the workspace's toolchain, which the simulator does not carry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from speculate.sim.scenario import Scenario, ScenarioError
from speculate.sim.scenario_yaml import load_scenario
from speculate.term import visible


def configure(ap: argparse.ArgumentParser) -> None:
    """The options of ``speculate sim check`` (on the command tree of :mod:`speculate.cli`)."""
    ap.description = (
        "Validate scenario files as the simulator reads them (format errors as file:line: reason). "
        "To replay them through the real agent loop and tools: speculate bench check FILE."
    )
    ap.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO.yaml")
    ap.set_defaults(run=check_run)


def load_all(paths: list[Path], *, prog: str) -> list[Scenario] | None:
    """Every file loaded, each described on one line; ``None`` (the error printed) at the first bad one."""
    try:
        scenarios = [load_scenario(p) for p in paths]
    except ScenarioError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None
    for s in scenarios:
        print(visible(describe(s)))
    return scenarios


def describe(s: Scenario) -> str:
    n_exp = sum(st.checked for t in s.turns for st in t.steps)
    unknown = ", acceptance unknown (the session did not record which prompts were taken from a suggestion)"
    return (
        f"{s.source}: ok: {s.name!r}, {len(s.turns)} turns, {n_exp} expectation(s) on tool results, workspace "
        f"{s.workspace or '(files only)'}" + (unknown if s.acceptance == "unknown" else "")
    )


def check_run(a: argparse.Namespace) -> int:
    if load_all(a.scenarios, prog="speculate sim check") is None:
        return 2
    print("speculate sim check: valid; to replay: speculate bench check " + " ".join(map(str, a.scenarios)))
    return 0
