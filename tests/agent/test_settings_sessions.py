"""The permission settings in real sessions on the simulator: the settings' defaultMode as the starting mode,
dontAsk refusing what would ask, additional directories reaching the gates, an untrusted workspace's allow
rules ignored until it is trusted, disableAllHooks, and a disabled MCP server neither started nor offered."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.agent_types import ToolFinished
from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.authorize import SpecAuthorizer
from speculate.trust import record_trust

SCENARIO = """
name: settings-modes
turns:
  - prompt: "write b"
    steps:
      - tools:
          - Write: {file_path: "{root}/b.txt", content: "beta\\n"}
      - text: "Done."
    suggestion: null
  - prompt: "run python"
    steps:
      - tools:
          - Bash: {command: "python3 -c 'print(6 * 7)' > out.txt"}
      - text: "Done."
    suggestion: null
  - prompt: "read a"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "Done."
    suggestion: null
"""


def make(tmp: Path, settings: dict[str, Any] | None = None, *, mcp: dict[str, Any] | None = None) -> Path:
    root = tmp / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    if settings is not None:
        (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    if mcp is not None:
        (root / ".mcp.json").write_text(json.dumps(mcp))
    return root


@asynccontextmanager
async def session(root: Path, **cfg: Any) -> AsyncIterator[tuple[Session, list[ToolFinished], list[str]]]:
    finished: list[ToolFinished] = []
    asked: list[str] = []

    async def ask(tool: str, summary: str) -> Any:
        asked.append(f"{tool}: {summary}")
        return "y"  # a user who says yes: whatever is refused was refused without asking

    def on_event(e: Any) -> None:
        if isinstance(e, ToolFinished):
            finished.append(e)

    with SimServer([parse_scenario(SCENARIO)], time_scale=0.01) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(project=root, model=model, speculate=False, mcp=False, **cfg)
            async with open_session(config, ask=ask, on_event=on_event) as s:
                yield s, finished, asked


def test_dont_ask_refuses_what_would_ask_without_asking(tmp_path: Path) -> None:
    root = make(tmp_path, {"permissions": {"allow": ["Read"]}})

    async def main() -> None:
        async with session(root, mode="dontAsk", trusted=True) as (s, finished, asked):
            await s.submit("write b")
            await s.submit("run python")
            await s.submit("read a")
            assert asked == []
            write, bash, read = finished
            assert write.denied and bash.denied and "dontAsk" in write.result and "dontAsk" in bash.result
            assert not read.is_error and "alpha" in read.result

    trio.run(main)
    assert not (root / "b.txt").exists() and not (root / "out.txt").exists()


@pytest.mark.parametrize("where", ["project", "local"])
def test_the_settings_default_mode_starts_the_session(tmp_path: Path, where: str) -> None:
    perms = {"permissions": {"defaultMode": "plan"}}
    root = make(tmp_path, perms if where == "project" else None)
    if where == "local":
        (root / ".claude" / "settings.local.json").write_text(json.dumps(perms))

    async def main() -> None:
        async with session(root, mode="default", settings_mode=True) as (s, finished, asked):
            assert s.cfg.mode == "plan" and s.authorizer.mode == "plan"
            await s.submit("write b")
            assert finished[0].denied and "Plan mode" in finished[0].result and asked == []

    trio.run(main)
    assert not (root / "b.txt").exists()


def test_a_mode_given_by_the_caller_wins_over_the_settings(tmp_path: Path) -> None:
    root = make(tmp_path, {"permissions": {"defaultMode": "plan"}})

    async def main() -> None:
        async with session(root, mode="acceptEdits") as (s, finished, _):
            await s.submit("write b")
            assert s.cfg.mode == "acceptEdits" and not finished[0].is_error

    trio.run(main)
    assert (root / "b.txt").read_text() == "beta\n"


def test_additional_directories_reach_the_main_and_the_fork_gates(tmp_path: Path) -> None:
    root = make(tmp_path, {"permissions": {"additionalDirectories": ["../shared"]}})

    async def main() -> None:
        async with session(root, additional_dirs=[str(tmp_path / "cli")], trusted=True) as (s, _, _):
            expected = [str(tmp_path / "cli"), str(tmp_path / "shared")]
            assert s.authorizer.additional_dirs == expected
            assert [str(d) for d in s.authorizer.gate.additional_dirs] == expected
            s.set_mode("plan")  # a new gate: the directories stay
            assert [str(d) for d in s.authorizer.gate.additional_dirs] == expected
        async with session(root, additional_dirs=[], trusted=False) as (s, _, _):
            assert s.authorizer.gate.additional_dirs == ()  # untrusted: the project's are ignored

    trio.run(main)
    fork = SpecAuthorizer(mode="default", allow=[], deny=[], sandboxed_bash=False, additional_dirs=["/x"])
    assert [str(d) for d in fork.gate.additional_dirs] == ["/x"]


def test_allow_rules_count_once_the_workspace_is_trusted(tmp_path: Path) -> None:
    root = make(tmp_path, {"permissions": {"allow": ["Write"]}})

    async def main() -> None:
        async with session(root, mode="default") as (s, finished, asked):  # trust read from the config
            assert not s.trusted and any(
                n.startswith("Ignoring 1 permissions.allow") for n in s.workspace.notes
            )
            await s.submit("write b")
            assert [a.split(":")[0] for a in asked] == ["Write"]  # the allow rule did not count
        (root / "b.txt").unlink()
        record_trust(root)
        async with session(root, mode="default") as (s, finished, asked):
            assert s.trusted and not any(n.startswith("Ignoring") for n in s.workspace.notes)
            await s.submit("write b")
            assert asked == [] and not finished[0].is_error

    trio.run(main)


def test_disable_all_hooks_runs_no_hook(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    hook = {"matcher": "*", "hooks": [{"type": "command", "command": f"echo ran >> {log}"}]}
    user = tmp_path / "user"
    user.mkdir()
    (user / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [hook], "SessionStart": [hook]}}))
    root = make(tmp_path, {"disableAllHooks": True})

    async def main() -> None:
        async with session(root, mode="acceptEdits", user_dir=user) as (s, finished, _):
            await s.submit("write b")
            assert not finished[0].is_error and s.hooks.hooks == ()

    trio.run(main)
    assert not log.exists()


@pytest.mark.slow
def test_a_disabled_mcp_server_is_neither_started_nor_offered(tmp_path: Path) -> None:
    server = Path(__file__).resolve().parents[1] / "mcp" / "server.py"
    spec = {"command": sys.executable, "args": [str(server)]}
    root = make(
        tmp_path,
        {"enableAllProjectMcpServers": True, "disabledMcpjsonServers": ["off"]},
        mcp={"mcpServers": {"on": spec, "off": spec}},
    )

    async def main() -> None:
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.01) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x") as model:
                cfg = SessionConfig(project=root, model=model, speculate=False, trusted=True)
                async with open_session(cfg) as s:
                    names = [json.loads(t)["name"] for t in s.key.tools_json]
                    assert "mcp__on__lookup" in names and not [n for n in names if n.startswith("mcp__off")]
                    assert [srv.name for srv in s.workspace.mcp.servers] == ["on"]

    trio.run(main)
