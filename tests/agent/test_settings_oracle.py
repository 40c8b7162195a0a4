"""Claude Code 2.1.332 as the oracle for the permission settings speculate reads: the same settings files,
global config and git state under ``claude -p`` (on the embedded simulator, scratch HOME) and under
speculate's readers, compared case by case: the starting mode (``permissions.defaultMode``, Claude Code's
``init`` event), which workspaces ignore their allow rules (its "Ignoring ..." note), which hooks a
matcher with spaces fires, and which ``.mcp.json`` servers start. Skipped, with the reason, where the CLI
is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from speculate.mcp.config import disabled_servers, load_mcp_config
from speculate.settings import load_settings
from speculate.settings_modes import starting_mode
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.trust import is_trusted

pytestmark = pytest.mark.slow


@pytest.fixture
def binary() -> Path:
    found = ClaudeCode.locate()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def scenario(tools: list[str]) -> str:
    steps = "".join(f"      - tools:\n          - {t}\n" for t in tools)
    return f'name: oracle\nturns:\n  - prompt: "go"\n    steps:\n{steps}      - text: "done"\n    suggestion: null\n'


class Case:
    """One project (``base/proj``), its HOME (``base/home``) and what ``claude -p`` made of them."""

    def __init__(self, base: Path, *, user: Any = None, project: Any = None, local: Any = None) -> None:
        self.base, self.root, self.home = base, base / "proj", base / "home"
        (self.root / ".claude").mkdir(parents=True)
        (self.home / ".claude").mkdir(parents=True)
        for path, obj in ((self.home / ".claude" / "settings.json", user),
                          (self.root / ".claude" / "settings.json", project),
                          (self.root / ".claude" / "settings.local.json", local)):  # fmt: skip
            if obj is not None:
                path.write_text(json.dumps(obj))

    def trust(self, *folders: Path) -> None:
        (self.home / ".claude.json").write_text(
            json.dumps({"projects": {str(f): {"hasTrustDialogAccepted": True} for f in folders}})
        )

    def claude(
        self, binary: Path, tools: Sequence[str] = (), cwd: Path | None = None
    ) -> tuple[dict[str, Any], str]:
        """Claude Code's init event and stderr."""
        cc = ClaudeCode(binary, home=self.home)
        with SimServer([parse_scenario(scenario(list(tools)))], seed=0, time_scale=0.01) as sim:
            p = subprocess.run(
                [str(binary), "-p", "--output-format", "stream-json", "--verbose", "--", "go"],
                cwd=cwd or self.root, env=cc.env(sim.base_url), capture_output=True, text=True,
                timeout=300, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
        return next(e for e in events if e.get("subtype") == "init"), p.stderr


def use_home(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    """speculate's readers look where this case's Claude Code looks (~/.claude.json, ~/.claude)."""
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(case.home))


def dm(mode: str) -> dict[str, Any]:
    return {"permissions": {"defaultMode": mode}}


MODE_CASES = {
    "user plan": (dm("plan"), None, None),
    "project over user": (dm("plan"), dm("acceptEdits"), None),
    "local over project": (None, dm("acceptEdits"), dm("plan")),
    "dontAsk": (None, dm("dontAsk"), None),
    "manual": (None, dm("manual"), None),
    "not a mode: the lower file's": (dm("acceptEdits"), dm("bogus"), None),
    "bypassPermissions from a project": (dm("acceptEdits"), dm("bypassPermissions"), None),
}


def test_the_starting_mode_is_claude_codes(
    binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = {}
    for i, (name, (user, project, local)) in enumerate(MODE_CASES.items()):
        case = Case(tmp_path / str(i), user=user, project=project, local=local)
        case.trust(case.root)
        init, _ = case.claude(binary)
        use_home(monkeypatch, case)
        ours = starting_mode(None, load_settings(case.root).default_mode, "default")
        seen[name] = (init["permissionMode"], ours)
    assert all(cc == ours for cc, ours in seen.values()), seen


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_the_workspaces_that_ignore_allow_rules_are_claude_codes(
    binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow = {"permissions": {"allow": ["Bash(python3:*)"]}}
    seen = {}
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "trusted": ({"project": allow}, "root"),
        "untrusted": ({"project": allow}, ""),
        "a parent trusted, no git": ({"project": allow}, "base"),
        "untracked local file": ({"local": allow}, ""),
        "tracked local file": ({"local": allow}, "git-add"),
        "git root trusted, a subfolder runs": ({}, "git-sub"),
        "above the git root trusted": ({"project": allow}, "git-above"),
    }
    for i, (name, (files, how)) in enumerate(cases.items()):
        case = Case(tmp_path / str(i), **files)
        cwd = case.root
        if how == "root":
            case.trust(case.root)
        elif how == "base":
            case.trust(case.base)
        elif how == "git-add":
            git(case.root, "init", "-q")
            git(case.root, "add", "-f", ".claude/settings.local.json")
        elif how == "git-sub":
            git(case.root, "init", "-q")
            cwd = case.root / "sub"
            (cwd / ".claude").mkdir(parents=True)
            (cwd / ".claude" / "settings.json").write_text(json.dumps(allow))
            case.trust(case.root)
        elif how == "git-above":
            git(case.root, "init", "-q")
            case.trust(case.base)
        _, stderr = case.claude(binary, cwd=cwd)
        use_home(monkeypatch, case)
        ignored = load_settings(cwd, trusted=is_trusted(cwd)).untrusted_ignored > 0
        seen[name] = ("Ignoring 1 permissions.allow entry" in stderr, ignored)
    assert all(cc == ours for cc, ours in seen.values()), seen
    assert {cc for cc, _ in seen.values()} == {True, False}  # both kinds among the cases


MATCHERS = ["Read ", "Edit | Write", " Glob", "Edit, Write", "Wri te", " * ", "R.ad ", "(Edit | Write)", "  "]


def test_the_hooks_a_matcher_fires_are_claude_codes(
    binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One file per firing: Claude Code runs an event's hooks at once, and lines appended to one log
    # interleaved under load ("31 Edit" and "Edit" for "3 Edit" and "1 Edit").
    log = tmp_path / "fired"
    log.mkdir()
    record = (
        f'{sys.executable} -c "import json,sys,pathlib; '
        f"pathlib.Path(sys.argv[2], sys.argv[1] + ' ' + json.load(sys.stdin)['tool_name']).touch()\""
    )
    hooks = {
        "PreToolUse": [
            {"matcher": m, "hooks": [{"type": "command", "command": f"{record} {i} {log}"}]}
            for i, m in enumerate(MATCHERS)
        ]
    }
    case = Case(tmp_path / "c", project={"hooks": hooks, "permissions": {"defaultMode": "acceptEdits"}})
    case.trust(case.root)
    (case.root / "a.txt").write_text("alpha\n")
    tools = [
        'Read: {file_path: "{root}/a.txt"}',
        'Write: {file_path: "{root}/w.txt", content: "x"}',
        'Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "beta"}',
    ]
    case.claude(binary, tools)
    fired = {tuple(p.name.split()) for p in log.iterdir()}
    use_home(monkeypatch, case)
    ours = {(str(MATCHERS.index(h.matcher)), t) for h in load_settings(case.root).hooks
            for t in ("Read", "Write", "Edit") if h.matches(t)}  # fmt: skip
    assert fired == ours and ("1", "Write") in fired


def test_the_mcp_servers_started_are_claude_codes(
    binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = {"command": sys.executable, "args": [str(Path(__file__).parents[1] / "mcp" / "server.py")]}
    case = Case(
        tmp_path / "c",
        user={"disabledMcpjsonServers": ["a"]},
        project={"enabledMcpjsonServers": ["a", "b"], "enableAllProjectMcpServers": True},
        local={"disabledMcpjsonServers": ["c"]},
    )
    (case.root / ".mcp.json").write_text(json.dumps({"mcpServers": {n: server for n in "abcd"}}))
    case.trust(case.root)
    init, _ = case.claude(binary)
    use_home(monkeypatch, case)
    settings = load_settings(case.root)
    ours = load_mcp_config(case.root, disabled=disabled_servers(case.root, settings.mcp_disabled))
    assert sorted(s["name"] for s in init["mcp_servers"]) == sorted(ours.servers) == ["b", "d"]
