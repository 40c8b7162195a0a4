"""The bench's approval policy: what the simulated user answers on accepting a speculation that ran a
command the live path would have asked about (``find build -delete`` in acceptEdits; Claude Code lets ``rm -rf build`` through there)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bench.plan import Condition, Job, RunConfig
from bench.session_run import run_session
from bench.toolchain import workspace_toolchain
from bench.user import FixedThink
from speculate.models.anthropic import AnthropicModel
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.sandbox_shell import bash_sandbox

CLEAN = """
name: bench-clean
description: a turn whose command the live path asks about in acceptEdits
files:
  a.txt: "alpha\\n"
  build/out.o: "object\\n"
turns:
  - prompt: "look at the build"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "There is a stale build directory."
    suggestion: "delete the build directory"
  - prompt: "delete the build directory"
    steps:
      - tools:
          - Bash: {command: "find build -delete"}
      - text: "Removed build/."
    suggestion: null
"""


@pytest.mark.parametrize(
    ("approval", "accepted", "answer"), [("as-live", True, "approved"), ("decline", False, "declined")]
)
def test_the_approval_policy_decides_whether_the_speculation_is_used(
    tmp_path: Path, approval: str, accepted: bool, answer: str
) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    scn = parse_scenario(CLEAN)
    cfg = RunConfig(
        scenarios=[scn],
        conditions=[Condition(think=FixedThink(1))],
        time_scale=0.05,
        user_edit_prob=0.0,
        approval=approval,
    )  # type: ignore[arg-type]
    job = Job(0, 0, cfg.conditions[0], scn, 0, "speculative", 0)

    async def main() -> tuple[list, dict, list]:
        with SimServer([scn], time_scale=0.05) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
                return await run_session(job, model, cfg, tmp_path, workspace_toolchain(None))

    turns, sess, events = trio.run(main)
    assert [t["accepted"] for t in turns] == [False, accepted] and sess["leaks"] == []
    (spec,) = [e for e in events if e["kind"] == "speculation"]
    assert spec["approval"] == answer and len(spec["approvals"]) == 1
    # What the command changed is known once it has finished; on a loaded machine the (time-scaled) user may
    # take the suggestion while it still runs, and is then shown what it did so far.
    assert spec["approvals"][0] in (
        "Bash(find build -delete): deleted build/",
        "Bash(find build -delete): no change to the project (so far: it was still running)",
        "Bash(find build -delete): deleted build/ (so far: it was still running)",
    )
    assert spec["outcome"] == ("accepted" if accepted else "declined")
    assert turns[1]["error"] == ""  # declined: the live turn ran it, the simulated user answering y
