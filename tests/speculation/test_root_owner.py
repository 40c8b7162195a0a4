"""Root on another user's project (issue #34 item 2): a speculation's commands keep the file capabilities
root has live, so ``sed -i`` on uid 1000's 0640 file and ``>>`` on its 0644 file do in the fork what they
do live, and the accepted turn leaves the tree the live turn leaves, owners and modes included."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from speculate.models.anthropic import AnthropicModel
from speculate.session import SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.sandbox_shell import bash_sandbox

OWNER = 1000
COMMAND = "sed -i s/alpha/beta/ p.txt; echo more >> c.txt; echo new > n.txt; ls -ln . > /dev/null"
SCENARIO = f"""
name: root-on-another-users-project
turns:
  - prompt: "look at the files"
    steps:
      - tools:
          - Bash: {{command: "cat p.txt c.txt"}}
      - text: "They hold alpha and gamma."
    suggestion: "update the files"
  - prompt: "update the files"
    steps:
      - tools:
          - Bash: {{command: "{COMMAND}"}}
      - tools:
          - Bash: {{command: "id -u; stat -c '%u:%g %a %n' p.txt c.txt n.txt ."}}
      - text: "Updated."
    suggestion: null
"""


def _project(at: Path) -> Path:
    at.mkdir()
    (at / "p.txt").write_text("alpha\n")
    (at / "c.txt").write_text("gamma\n")
    os.chmod(at / "p.txt", 0o640)
    os.chmod(at / "c.txt", 0o644)
    for p in (at, at / "p.txt", at / "c.txt"):
        os.chown(p, OWNER, OWNER)
    return at


def _tree(root: Path) -> dict[str, tuple[str, int, int, int]]:
    """Every file and the root: content, mode, owner, group."""
    out = {}
    for p in sorted([root, *root.rglob("*")]):
        st = p.lstat()
        body = p.read_text() if p.is_file() else ""
        out[os.fspath(p.relative_to(root))] = (body, st.st_mode, st.st_uid, st.st_gid)
    return out


def test_root_on_a_uid_1000_project_accepts_what_the_live_turn_makes(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("root only: a normal user's commands run as themselves, on their own files")
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    live, spec = _project(tmp_path / "live"), _project(tmp_path / "spec")
    # The live turn: the Bash tool runs the command as this process, root, on the real tree.
    subprocess.run(["bash", "-c", COMMAND], cwd=live, check=True)
    seen: list[str] = []

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.02) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
                cfg = SessionConfig(
                    project=spec, model=model, events_path=tmp_path / "events.jsonl", allow=["Bash"]
                )
                async with open_session(cfg) as s:
                    await s.submit("look at the files")
                    assert await s.wait_suggestion() == "update the files"
                    await s.wait_speculation()
                    fork = s.engine._spec
                    assert fork is not None and fork.complete, fork.record if fork else None
                    assert (spec / "p.txt").read_text() == "alpha\n"  # nothing landed yet
                    out = await s.submit("update the files")
                    assert out.accepted
                    seen.extend(
                        str(b["content"])
                        for m in s.messages
                        if m["role"] == "user" and isinstance(m["content"], list)
                        for b in m["content"]
                        if b.get("type") == "tool_result"
                    )

    trio.run(main)
    assert _tree(spec) == _tree(live)
    assert (spec / "p.txt").stat().st_uid == OWNER and (spec / "n.txt").stat().st_uid == 0
    # What the fork's commands saw, as the live command would: root, the owners of the real tree.
    assert seen[-1].splitlines() == [
        "0",
        f"{OWNER}:{OWNER} 640 p.txt",
        f"{OWNER}:{OWNER} 644 c.txt",
        "0:0 644 n.txt",
        f"{OWNER}:{OWNER} 755 .",
    ]
    shutil.rmtree(tmp_path / "live")
