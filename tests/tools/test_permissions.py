"""The permission gate: modes, rule parsing, and a table of rule matches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from speculate.permissions import Decision, PermissionGate, PermissionRuleError, Rule, split_command
from speculate.tools import tools_by_name

TOOLS = tools_by_name()
ROOT = Path("/proj")


def check(gate: PermissionGate, tool: str, **inp: Any) -> Decision:
    return gate.check(TOOLS[tool], inp)


EDIT = {"file_path": "/proj/src/a.py", "old_string": "a", "new_string": "b"}
WRITE = {"file_path": "/proj/docs/x.md", "content": "x"}
READ = {"file_path": "/proj/src/a.py"}
RISKY = {"command": "rm -rf build"}
SAFE = {"command": "ls -la"}


# (mode, tool, input, expected behavior) with no rules
MODE_TABLE = [
    ("default", "Read", READ, "allow"),
    ("default", "Grep", {"pattern": "x"}, "allow"),
    ("default", "Glob", {"pattern": "*"}, "allow"),
    ("default", "Edit", EDIT, "ask"),
    ("default", "Write", WRITE, "ask"),
    ("default", "Bash", RISKY, "ask"),
    ("acceptEdits", "Edit", EDIT, "allow"),
    ("acceptEdits", "Write", WRITE, "allow"),
    ("acceptEdits", "Bash", RISKY, "ask"),
    ("bypassPermissions", "Edit", EDIT, "allow"),
    ("bypassPermissions", "Bash", RISKY, "allow"),
    ("plan", "Read", READ, "allow"),
    ("plan", "Edit", EDIT, "deny"),
    ("plan", "Write", WRITE, "deny"),
    ("plan", "Bash", RISKY, "deny"),
]


@pytest.mark.parametrize(("mode", "tool", "inp", "expected"), MODE_TABLE)
def test_modes(mode: Any, tool: str, inp: dict[str, Any], expected: str) -> None:
    d = check(PermissionGate(mode=mode, root=ROOT), tool, **inp)
    assert d.behavior == expected
    assert d.reason  # every decision explains itself


def test_read_only_bash_follows_classifier() -> None:
    pytest.importorskip("speculate.shell.classify", reason="the bash classifier is not in this checkout")
    assert check(PermissionGate(mode="default"), "Bash", **SAFE).behavior == "allow"
    assert check(PermissionGate(mode="plan"), "Bash", **SAFE).behavior == "allow"


def test_plan_denial_reason_is_fit_for_a_tool_result() -> None:
    d = check(PermissionGate(mode="plan"), "Edit", **EDIT)
    assert d.behavior == "deny" and "Plan mode" in d.reason and "Edit" in d.reason


# (allow, deny, tool, input, expected) in default mode
RULE_TABLE: list[tuple[list[str], list[str], str, dict[str, Any], str]] = [
    (["Bash(git *)"], [], "Bash", {"command": "git push origin main"}, "allow"),
    (["Bash(git *)"], [], "Bash", {"command": "git"}, "allow"),
    (["Bash(git *)"], [], "Bash", {"command": "gitk --all"}, "ask"),
    (["Bash(git *)"], [], "Bash", {"command": "git add . && rm -rf /tmp/x"}, "ask"),
    (["Bash(git *)", "Bash(rm *)"], [], "Bash", {"command": "git add . && rm -rf /tmp/x"}, "allow"),
    (["Bash(git *)"], [], "Bash", {"command": "git log $(rm -rf x)"}, "ask"),
    (["Bash(git *)"], [], "Bash", {"command": "git commit -m 'a && b; c'"}, "allow"),
    (["Bash(npm run test:*)"], [], "Bash", {"command": "npm run test -- -x"}, "allow"),
    (["Bash(npm run test:*)"], [], "Bash", {"command": "npm run testing"}, "ask"),
    (["Bash(npm run test:*)"], [], "Bash", {"command": "npm run build"}, "ask"),
    (["Bash(make)"], [], "Bash", {"command": "make"}, "allow"),
    (["Bash(make)"], [], "Bash", {"command": "make install"}, "ask"),
    (["Bash(cd a && make)"], [], "Bash", {"command": "cd a && make"}, "allow"),
    (["Bash"], ["Bash(rm *)"], "Bash", {"command": "rm -rf x"}, "deny"),
    (["Bash"], ["Bash(rm *)"], "Bash", {"command": "cd x && rm -rf y"}, "deny"),
    (["Bash"], ["Bash(rm *)"], "Bash", {"command": "cd x; make"}, "allow"),
    (["Bash(*)"], [], "Bash", {"command": "anything at all"}, "allow"),
    (["Edit(src/**)"], [], "Edit", EDIT, "allow"),
    (["Edit(src/**)"], [], "Edit", {**EDIT, "file_path": "/proj/lib/a.py"}, "ask"),
    (["Edit(src/**)"], [], "Write", {"file_path": "src/new.py", "content": ""}, "allow"),
    (["Edit(src)"], [], "Edit", {**EDIT, "file_path": "/proj/src/deep/a.py"}, "allow"),
    (["Write(*.md)"], [], "Write", WRITE, "allow"),
    (["Write(*.md)"], [], "Edit", {**EDIT, "file_path": "/proj/docs/x.md"}, "ask"),
    (["Write(/docs/*.md)"], [], "Write", {"file_path": "/proj/sub/docs/x.md", "content": ""}, "ask"),
    (["Edit"], ["Edit(secrets/**)"], "Edit", {**EDIT, "file_path": "secrets/k.txt"}, "deny"),
    (["Edit"], ["Edit(secrets/**)"], "Write", {"file_path": "/proj/secrets/k.txt", "content": ""}, "deny"),
    ([], ["Read(*.env)"], "Read", {"file_path": "/proj/config/.env"}, "deny"),  # as in gitignore
    ([], ["Read(*.env)"], "Read", {"file_path": "/proj/config/env.py"}, "allow"),
    ([], ["Read(.env)"], "Read", {"file_path": "/proj/config/.env"}, "deny"),
    ([], ["Read(secrets)"], "Grep", {"pattern": "k", "path": "secrets"}, "deny"),
    ([], ["Read"], "Glob", {"pattern": "*"}, "deny"),
    (["Edit(src/**)"], [], "Edit", {**EDIT, "file_path": "/elsewhere/src/a.py"}, "ask"),
]


@pytest.mark.parametrize(("allow", "deny", "tool", "inp", "expected"), RULE_TABLE)
def test_rules(allow: list[str], deny: list[str], tool: str, inp: dict[str, Any], expected: str) -> None:
    d = check(PermissionGate(mode="default", allow=allow, deny=deny, root=ROOT), tool, **inp)
    assert d.behavior == expected, d
    if expected == "deny":
        assert d.rule in deny and repr(d.rule) in d.reason


def test_deny_beats_allow_and_bypass_and_ask_rules_prompt() -> None:
    gate = PermissionGate(mode="bypassPermissions", allow=["Bash(rm *)"], deny=["Bash(rm *)"])
    d = check(gate, "Bash", **RISKY)
    assert d.behavior == "deny" and d.reason == "Permission to use Bash was denied by rule 'Bash(rm *)'."
    gate = PermissionGate(mode="bypassPermissions", ask=["Edit(src/**)"], root=ROOT)
    assert check(gate, "Edit", **EDIT).behavior == "ask"


def test_plan_mode_is_not_overridden_by_allow_rules() -> None:
    gate = PermissionGate(mode="plan", allow=["Edit", "Bash"])
    assert check(gate, "Edit", **EDIT).behavior == "deny"
    assert check(gate, "Bash", **RISKY).behavior == "deny"


def test_raw_input_is_validated() -> None:
    from speculate.tools.base import ToolError

    with pytest.raises(ToolError, match="file_path"):
        PermissionGate().check(TOOLS["Edit"], {"old_string": "a", "new_string": "b"})


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("Bash(git *", "invalid permission rule 'Bash(git *'"),
        ("bash(ls)", "unknown tool 'bash'"),
        ("Edit()", "empty specifier"),
        ("", "invalid permission rule ''"),
        ("Read(a)(b) x", "invalid permission rule"),
    ],
)
def test_bad_rules_are_named(rule: str, message: str) -> None:
    with pytest.raises(PermissionRuleError, match=message.replace("(", r"\(").replace("*", r"\*")):
        PermissionGate(allow=[rule])


def test_bad_mode_is_named() -> None:
    with pytest.raises(ValueError, match="unknown permission mode 'yolo'"):
        PermissionGate(mode="yolo")  # type: ignore[arg-type]


def test_rule_parse_and_split() -> None:
    assert Rule.parse("Bash(git *)") == Rule("Bash", "git *", "Bash(git *)")
    assert Rule.parse("Read").specifier is None
    assert Rule.parse("Bash(echo (x))").specifier == "echo (x)"
    assert split_command("a && b || c; d | e & f\ng") == (["a", "b", "c", "d", "e", "f", "g"], False)
    assert split_command("echo 'a;b' \"c|d\" e\\;f 2>&1") == (["echo 'a;b' \"c|d\" e\\;f 2>&1"], False)
    assert split_command("echo `id`")[1] and split_command("cat <(ls)")[1]
    assert not split_command("echo '$(x)'")[1]
