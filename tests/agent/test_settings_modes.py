"""The permission settings besides the rules, read from real settings files as Claude Code 2.1.332 reads them
(each fact observed with ``claude -p``; docs/claude-code.md "Settings and modes"): ``permissions.defaultMode``
and its precedence, ``additionalDirectories``, ``disableAllHooks``, the MCP approval keys, workspace trust's
effect on a project's entries, hook matchers with spaces, and the ``--allowedTools`` list syntax."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from speculate.mcp.config import disabled_servers, load_mcp_config
from speculate.settings import Hook, load_settings
from speculate.settings_modes import CliRuleError, cli_rules, split_rules, starting_mode


def put(root: Path, rel: str, obj: Any) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj))
    return p


def files(tmp: Path, *, user: Any = None, project: Any = None, local: Any = None) -> tuple[Path, Path]:
    root, user_dir = tmp / "proj", tmp / "user"
    root.mkdir(parents=True, exist_ok=True)
    user_dir.mkdir(exist_ok=True)
    for where, rel, obj in ((user_dir, "settings.json", user), (root, ".claude/settings.json", project),
                            (root, ".claude/settings.local.json", local)):  # fmt: skip
        if obj is not None:
            put(where, rel, obj)
    return root, user_dir


def dm(mode: str) -> dict[str, Any]:
    return {"permissions": {"defaultMode": mode}}


# -- defaultMode -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("user", "project", "local", "expected"),
    [
        (dm("plan"), None, None, "plan"),
        (dm("plan"), dm("acceptEdits"), None, "acceptEdits"),  # project over user
        (None, dm("acceptEdits"), dm("plan"), "plan"),  # local over project
        (None, dm("dontAsk"), None, "dontAsk"),
        (None, dm("manual"), None, "default"),  # 2.1.332's other name for default
        (dm("acceptEdits"), dm("yolo"), None, "acceptEdits"),  # not a mode: ignored, the lower file counts
        (dm("bypassPermissions"), None, None, "bypassPermissions"),  # the user's own file may
        (dm("acceptEdits"), dm("bypassPermissions"), None, "default"),  # a project's may not: default
        (None, None, dm("bypassPermissions"), "default"),
        (None, {"permissions": {}}, None, None),
    ],
)
def test_default_mode_precedence_as_claude_code(
    tmp_path: Path, user: Any, project: Any, local: Any, expected: str | None
) -> None:
    root, user_dir = files(tmp_path, user=user, project=project, local=local)
    assert load_settings(root, user=user_dir).default_mode == expected


def test_ignored_default_modes_are_said(tmp_path: Path) -> None:
    root, user_dir = files(tmp_path, project=dm("auto"), local=dm("bypassPermissions"))
    s = load_settings(root, user=user_dir)
    assert s.default_mode == "default"
    assert any("'auto'" in n and "auto mode" in n for n in s.notes)
    assert any("bypassPermissions counts only in your user settings" in n for n in s.notes)


def test_the_command_line_mode_comes_first() -> None:
    assert starting_mode("acceptEdits", "plan", "default") == "acceptEdits"
    assert starting_mode("manual", "plan", "default") == "default"
    assert starting_mode(None, "plan", "default") == "plan"
    assert starting_mode(None, None, "acceptEdits") == "acceptEdits"


# -- additionalDirectories and trust ------------------------------------------------------------------------
def test_additional_directories_resolve_against_the_project_and_join(tmp_path: Path) -> None:
    root, user_dir = files(
        tmp_path,
        user={"permissions": {"additionalDirectories": ["~/notes"]}},
        project={"permissions": {"additionalDirectories": ["../other", str(tmp_path / "abs")]}},
    )
    s = load_settings(root, user=user_dir)
    assert s.additional_dirs == (
        str(Path.home() / "notes"),
        str(tmp_path / "other"),
        str(tmp_path / "abs"),
    )


def test_an_untrusted_workspace_drops_the_projects_allow_rules_and_directories(tmp_path: Path) -> None:
    root, user_dir = files(
        tmp_path,
        user={"permissions": {"allow": ["Bash(ls:*)"], "additionalDirectories": ["/u"]}},
        project={
            "permissions": {
                "allow": ["Bash", "Edit"],
                "deny": ["Bash(rm:*)"],
                "ask": ["Write"],
                "additionalDirectories": ["/p"],
                "defaultMode": "acceptEdits",
            }
        },
        local={"permissions": {"allow": ["Read"]}},  # untracked: the user's own file, it counts
    )
    trusted = load_settings(root, user=user_dir)
    assert trusted.allow == ("Bash(ls:*)", "Bash", "Edit", "Read") and trusted.untrusted_ignored == 0
    s = load_settings(root, user=user_dir, trusted=False)
    assert s.allow == ("Bash(ls:*)", "Read")
    assert s.deny == ("Bash(rm:*)",) and s.ask == ("Write",) and s.default_mode == "acceptEdits"
    assert s.additional_dirs == ("/u",) and s.untrusted_ignored == 3
    allow_note, dirs_note = [n for n in s.notes if n.startswith("Ignoring")]
    assert allow_note.startswith(
        "Ignoring 2 permissions.allow entries from .claude/settings.json: this workspace has not been trusted."
    )
    assert f'projects["{root}"].hasTrustDialogAccepted: true in ' in allow_note
    assert dirs_note.startswith(
        "Ignoring 1 permissions.additionalDirectories entry from .claude/settings.json"
    )


def test_a_local_settings_file_git_tracks_is_a_projects_file(tmp_path: Path) -> None:
    root, user_dir = files(tmp_path, local={"permissions": {"allow": ["Read"]}})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert load_settings(root, user=user_dir, trusted=False).allow == ("Read",)  # untracked
    subprocess.run(["git", "-C", str(root), "add", "-f", ".claude/settings.local.json"], check=True)
    s = load_settings(root, user=user_dir, trusted=False)
    assert s.allow == () and any("from .claude/settings.local.json" in n for n in s.notes)


# -- hooks ---------------------------------------------------------------------------------------------------
def hooks(tag: str) -> dict[str, Any]:
    return {"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": tag}]}]}}


@pytest.mark.parametrize(
    ("user", "project", "local", "commands"),
    [
        (hooks("user"), {"disableAllHooks": True}, None, []),  # the project's turns off the user's too
        ({"disableAllHooks": True}, hooks("proj"), None, []),
        ({"disableAllHooks": True, **hooks("user")}, {"disableAllHooks": False, **hooks("proj")}, None,
         ["user", "proj"]),  # a later false turns them back on
        (None, hooks("proj"), {"disableAllHooks": True}, []),
    ],
)  # fmt: skip
def test_disable_all_hooks_is_the_last_files_and_turns_off_every_hook(
    tmp_path: Path, user: Any, project: Any, local: Any, commands: list[str]
) -> None:
    root, user_dir = files(tmp_path, user=user, project=project, local=local)
    s = load_settings(root, user=user_dir)
    assert [h.command for h in s.hooks] == commands
    assert (s.hooks_off is not None) == (not commands)


def test_disable_all_hooks_must_be_a_boolean(tmp_path: Path) -> None:
    from speculate.settings import SettingsError

    root, user_dir = files(tmp_path, project={"disableAllHooks": "true"})
    with pytest.raises(SettingsError, match="disableAllHooks"):
        load_settings(root, user=user_dir)


@pytest.mark.parametrize(
    ("matcher", "fires_on"),
    [
        ("Read ", {"Read"}),
        ("Edit | Write", {"Edit", "Write"}),
        ("Edit |Write", {"Edit", "Write"}),
        ("Edit, Write", {"Edit", "Write"}),
        (" Glob", {"Glob"}),
        ("Wri te", set()),  # one name with a space in it: no tool
        ("  ", set()),  # blanks are not "every tool"
        (" * ", set()),  # a regular expression that needs a space
        ("R.ad ", set()),
        ("(Edit | Write)", set()),
        ("Edit|Write", {"Edit", "Write"}),
        ("*", {"Read", "Edit", "Write", "Glob", "Bash"}),
    ],
)
def test_matchers_are_trimmed_as_claude_code_trims_them(matcher: str, fires_on: set[str]) -> None:
    h = Hook("PreToolUse", matcher, "true", 60.0, Path("settings.json"))
    assert {t for t in ("Read", "Edit", "Write", "Glob", "Bash") if h.matches(t)} == fires_on


# -- MCP approval keys ---------------------------------------------------------------------------------------
def test_disabled_mcp_servers_are_left_out_whatever_enables_them(tmp_path: Path) -> None:
    root, user_dir = files(
        tmp_path,
        user={"disabledMcpjsonServers": ["a"]},
        project={"enabledMcpjsonServers": ["a", "b"], "enableAllProjectMcpServers": True},
        local={"disabledMcpjsonServers": ["c"]},
    )
    put(root, ".mcp.json", {"mcpServers": {n: {"command": "true"} for n in ("a", "b", "c", "d")}})
    s = load_settings(root, user=user_dir)
    assert s.mcp_disabled == {"a", "c"} and s.mcp_enabled == {"a", "b"} and s.mcp_enable_all
    cfg = load_mcp_config(root, disabled=disabled_servers(root, s.mcp_disabled))
    assert list(cfg.servers) == ["b", "d"] and cfg.disabled == ("a", "c")  # d: in no list, started (-p)


def test_the_global_configs_project_entry_disables_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfgdir = tmp_path / "cfg"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(cfgdir))
    root, _ = files(tmp_path)
    put(cfgdir, ".claude.json", {"projects": {str(root): {"disabledMcpjsonServers": ["x"]}}})
    assert disabled_servers(root) == {"x"}


# -- the command line's rule lists ---------------------------------------------------------------------------
def test_allowed_tools_split_at_commas_and_blanks_outside_parentheses() -> None:
    assert split_rules(["Bash(git log:*) Edit"]) == ["Bash(git log:*)", "Edit"]
    assert split_rules(["Bash(git --version), Bash(python3:*)", "Write"]) == [
        "Bash(git --version)",
        "Bash(python3:*)",
        "Write",
    ]
    assert split_rules(["Read,Grep  Glob"]) == ["Read", "Grep", "Glob"]


def test_cli_rules_are_checked(tmp_path: Path) -> None:
    notes: list[str] = []
    assert cli_rules(["Bash(git log:*) WebFetch mcp__docs"], "--allowedTools", notes) == [
        "Bash(git log:*)",
        "mcp__docs",
    ]
    assert notes == ["--allowedTools 'WebFetch': speculate has no tool 'WebFetch'; rule ignored"]
    with pytest.raises(CliRuleError, match="a directory, not a rule"):
        cli_rules([str(tmp_path)], "--allowedTools", [])
    with pytest.raises(CliRuleError, match="--disallowedTools 'Bash\\(git'"):
        cli_rules(["Bash(git"], "--disallowedTools", [])
