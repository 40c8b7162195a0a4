"""Settings files in Claude Code's format: what is read, what is merged, and errors that name file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculate.settings import SettingsError, load_settings


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_user_project_and_local_files_merge_in_order(tmp_path: Path, _no_user_claude_dir: Path) -> None:
    root = tmp_path / "proj"
    hook = {"type": "command", "command": "true"}
    write(
        _no_user_claude_dir / "settings.json",
        {
            "model": "opus",
            "hooks": {"Stop": [{"hooks": [{**hook, "command": "echo user"}]}]},
            "permissions": {"allow": ["Bash(git *)"]},
        },
    )
    write(
        root / ".claude" / "settings.json",
        {
            "hooks": {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [{**hook, "timeout": 5}]}]},
            "permissions": {"deny": ["Read(.env)"], "allow": ["mcp__docs"]},
            "speculation": {"readOnlyMcpTools": ["mcp__docs__search"], "env": ["CI", "BUILD_FLAVOUR"]},
        },
    )
    write(
        root / ".claude" / "settings.local.json",
        {
            "hooks": {"Stop": [{"hooks": [{**hook, "command": "echo local"}]}]},
            "speculation": {"env": ["BUILD_FLAVOUR", "NODE_ENV"]},
        },
    )
    s = load_settings(root)
    assert [(h.event, h.command, h.timeout) for h in s.hooks] == [
        ("Stop", "echo user", 60.0),
        ("PreToolUse", "true", 5.0),
        ("Stop", "echo local", 60.0),
    ]
    assert s.allow == ("Bash(git *)", "mcp__docs") and s.deny == ("Read(.env)",)
    assert s.read_only_mcp == {"mcp__docs__search"} and s.notes == ()
    assert s.env == ("CI", "BUILD_FLAVOUR", "NODE_ENV")  # speculation.env: joined, in order, once each
    pre = s.hooks[1]
    assert pre.matches("Edit") and pre.matches("Write") and not pre.matches("Read")


def test_matchers_follow_claude_codes_rules(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(
        root / ".claude" / "settings.json",
        {
            "hooks": {
                "PreToolUse": [
                    {"matcher": m, "hooks": [{"type": "command", "command": f"echo {i}"}]}
                    for i, m in enumerate(["", "*", "Bash", "mcp__.*", "^Gr"])
                ]
            }
        },
    )
    hooks = load_settings(root).hooks
    assert [h.matches("Bash") for h in hooks] == [True, True, True, False, False]
    assert [h.matches("mcp__docs__search") for h in hooks] == [True, True, False, True, False]
    assert [h.matches("Grep") for h in hooks] == [True, True, False, False, True]
    assert not hooks[2].matches("Bashful")  # a plain name matches exactly


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
        ("[]", "the top level must be a JSON object, not list"),
        (
            {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command"}]}]}},
            "hooks.PreToolUse[0].hooks[0]: Value error, a command hook needs a non-empty 'command'",
        ),
        (
            {
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hooks": [{"type": "command", "command": "x", "timeout": -1}]}
                    ]
                }
            },
            "hooks.PreToolUse[0].hooks[0].timeout: Input should be greater than 0",
        ),
        (
            {"hooks": {"PostToolUse": [{"matcher": "(", "hooks": []}]}},
            "hooks.PostToolUse[0].matcher: Value error, not a valid regular expression",
        ),
        ({"hooks": {"Stop": [{"hook": []}]}}, "hooks.Stop[0].hooks: Field required"),
        ({"hooks": {"Stop": {"hooks": []}}}, "hooks.Stop: Input should be a valid list"),
        (
            {"permissions": {"allow": ["Bash(git *"]}},
            "permissions.allow[0]: invalid permission rule 'Bash(git *'",
        ),
        (
            {"permissions": {"deny": ["mcp__docs(x)"]}},
            "permissions.deny[0]: invalid permission rule 'mcp__docs(x)': MCP rules take no specifier",
        ),
        (
            {"speculation": {"readOnlyMcpTools": ["search"]}},
            "speculation.readOnlyMcpTools: Value error, 'search' is not an MCP tool name",
        ),
        (
            {"speculation": {"env": ["CI", "NODE-ENV"]}},
            "speculation.env[1]: Value error, 'NODE-ENV' is not an environment variable name",
        ),
        ({"speculation": {"env": "CI"}}, "speculation.env: Input should be a valid list"),
    ],
)
def test_a_malformed_file_is_an_error_naming_the_file_and_key(
    tmp_path: Path, content: object, message: str
) -> None:
    path = write(tmp_path / "proj" / ".claude" / "settings.json", content)
    with pytest.raises(SettingsError) as e:
        load_settings(tmp_path / "proj")
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)


def test_what_speculate_does_not_run_is_a_note_not_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path / "proj" / ".claude" / "settings.json",
        {
            "hooks": {
                "Notification": [{"hooks": [{"type": "command", "command": "x"}]}],
                "Stop": [
                    {
                        "hooks": [
                            {"type": "prompt", "prompt": "are we done?"},
                            {"type": "command", "command": "true"},
                        ]
                    }
                ],
            },
            "permissions": {"allow": ["WebFetch(domain:example.com)", "Read(src/**)"]},
        },
    )
    s = load_settings(tmp_path / "proj")
    assert [h.command for h in s.hooks] == ["true"] and s.allow == ("Read(src/**)",)
    assert s.notes == (
        f"{path}: hooks.Notification: speculate runs only SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, "
        "PostToolUseFailure, Stop, PreCompact, SessionEnd hooks; ignored",
        f"{path}: hooks.Stop[0].hooks[0]: type 'prompt' is not run here (only 'command' hooks are); ignored",
        f"{path}: permissions.allow[0]: speculate has no tool 'WebFetch'; rule ignored",
    )


def test_each_rule_knows_its_file_and_where_slash_paths_start(
    tmp_path: Path, _no_user_claude_dir: Path
) -> None:
    root = tmp_path / "proj"
    user = write(_no_user_claude_dir / "settings.json", {"permissions": {"deny": ["Read(/src/u.txt)"]}})
    local = write(root / ".claude" / "settings.local.json", {"permissions": {"ask": ["Edit(/y/**)"]}})
    s = load_settings(root)
    (deny,), (ask,) = s.deny, s.ask
    assert (deny, deny.source, deny.base) == ("Read(/src/u.txt)", user, _no_user_claude_dir)  # type: ignore[attr-defined]
    assert (ask, ask.source, ask.base) == ("Edit(/y/**)", local, root)  # type: ignore[attr-defined]
