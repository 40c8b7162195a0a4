"""The permission gate: modes, rule parsing, and a table of rule matches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from speculate.permissions import Decision, PermissionGate, PermissionRuleError, Rule, RuleText, split_command
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
    # acceptEdits lets file commands through inside the project (Claude Code 2.1.332 ran `rm -rf build`)
    ("acceptEdits", "Bash", RISKY, "allow"),
    ("acceptEdits", "Bash", {"command": "chmod +x build/run.sh"}, "ask"),
    ("acceptEdits", "Bash", {"command": "rm -rf ."}, "ask"),
    ("acceptEdits", "Bash", {"command": "cp -r src /tmp/elsewhere"}, "ask"),
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


# Claude Code 2.1.332's own decisions, observed by running it (`claude -p`) against the simulator with these
# rules in <project>/.claude/settings.json (the project is /proj here, HOME is /home/u); docs/claude-code.md.
CC_HOME = Path("/home/u")
CC_TABLE: list[tuple[str, str, str, dict[str, Any], str]] = [
    # (list, rule, tool, input, Claude Code's decision)
    ("deny", "Read(./src/shop/pager.py)", "Read", {"file_path": "/proj/src/shop/pager.py"}, "deny"),
    ("deny", "Read(./src/shop/pager.py)", "Edit", {**EDIT, "file_path": "/proj/src/shop/pager.py"}, "deny"),
    (
        "deny",
        "Read(./src/shop/new.py)",
        "Write",
        {"file_path": "/proj/src/shop/new.py", "content": ""},
        "deny",
    ),
    ("deny", "Read(/src/b.txt)", "Read", {"file_path": "/proj/src/b.txt"}, "deny"),  # the project's root
    ("deny", "Read(/src/b.txt)", "Read", {"file_path": "/proj/.claude/src/b.txt"}, "allow"),  # not .claude/
    ("deny", "Read(//proj/src/c.txt)", "Read", {"file_path": "/proj/src/c.txt"}, "deny"),
    ("deny", "Read(~/secret.txt)", "Read", {"file_path": "/home/u/secret.txt"}, "deny"),
    ("deny", "Read(d.txt)", "Read", {"file_path": "/proj/sub/d.txt"}, "deny"),  # no "/": any depth
    ("deny", "Read(./d.txt)", "Read", {"file_path": "/proj/sub/d.txt"}, "deny"),  # "./" is the same
    ("deny", "Read(src/*.txt)", "Read", {"file_path": "/proj/src/a.txt"}, "deny"),
    ("deny", "Read(src/*.txt)", "Read", {"file_path": "/proj/x/src/a.txt"}, "allow"),  # a "/": anchored
    ("deny", "Read(*.env)", "Read", {"file_path": "/proj/deep/er/k.env"}, "deny"),
    ("deny", "Read(t/**/*.py)", "Read", {"file_path": "/proj/t/u/v.py"}, "deny"),
    ("deny", "Read(src/deep/**)", "Grep", {"pattern": "x", "path": "/proj/src/deep"}, "deny"),
    ("deny", "Read(src/deep/**)", "Glob", {"pattern": "*.txt", "path": "/proj/src/deep"}, "deny"),
    ("deny", "Read(src/deep/**)", "Grep", {"pattern": "x", "path": "/proj/src"}, "allow"),
    ("deny", "Edit(e.txt)", "Write", {"file_path": "/proj/sub/e.txt", "content": ""}, "deny"),
    ("ask", "Edit(./tests/**)", "Write", {"file_path": "/proj/tests/test_new.py", "content": ""}, "ask"),
    ("ask", "Edit(./tests/**)", "Edit", {**EDIT, "file_path": "/proj/tests/test_a.py"}, "ask"),
    ("ask", "Edit(/y/**)", "Write", {"file_path": "/proj/y/z.txt", "content": ""}, "ask"),
    ("deny", "Bash(echo hi:*)", "Bash", {"command": "echo hi there"}, "deny"),
    ("deny", "Bash(echo hi:*)", "Bash", {"command": "echo hi"}, "deny"),
    ("deny", "Bash(echo hi:*)", "Bash", {"command": "echo hix"}, "allow"),  # a word boundary
    ("deny", "Bash(echo hi:*)", "Bash", {"command": "true && echo hi"}, "deny"),  # any part of a compound
    ("deny", "Bash(printf *)", "Bash", {"command": "printf x"}, "deny"),
    ("deny", "Bash(ls *)", "Bash", {"command": "ls -la"}, "deny"),
    ("deny", "Bash(ls *)", "Bash", {"command": "lsof"}, "allow"),
    ("deny", "Bash(git * --short)", "Bash", {"command": "git status --short"}, "deny"),
    ("deny", "Bash(* --version)", "Bash", {"command": "npm --version"}, "deny"),
]


@pytest.mark.parametrize(
    ("kind", "rule", "tool", "inp", "expected"),
    CC_TABLE,
    ids=[
        f"{k}:{r}:{t}:{i.get('file_path') or i.get('path') or i.get('command')}" for k, r, t, i, _ in CC_TABLE
    ],
)
def test_claude_codes_rule_forms_decide_as_claude_code_did(
    kind: str, rule: str, tool: str, inp: dict[str, Any], expected: str
) -> None:
    text = RuleText(rule, base=ROOT)  # as read from <project>/.claude/settings.json
    gate = PermissionGate(mode="bypassPermissions", root=ROOT, home=CC_HOME, **{kind: [text]})
    assert check(gate, tool, **inp).behavior == expected


def test_a_user_settings_slash_rule_is_relative_to_the_users_claude_dir() -> None:
    # Claude Code 2.1.332: Read(/src/u.txt) in ~/.claude/settings.json denied ~/.claude/src/u.txt only.
    gate = PermissionGate(
        mode="bypassPermissions",
        root=ROOT,
        home=CC_HOME,
        deny=[RuleText("Read(/src/u.txt)", base=CC_HOME / ".claude")],
    )
    assert check(gate, "Read", file_path="/home/u/.claude/src/u.txt").behavior == "deny"
    assert check(gate, "Read", file_path="/proj/src/u.txt").behavior == "allow"
    assert check(gate, "Read", file_path="/home/u/src/u.txt").behavior == "allow"


def test_a_symlink_does_not_dodge_a_deny_rule(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    (tmp_path / "link.txt").symlink_to(tmp_path / "secret.txt")
    gate = PermissionGate(
        mode="bypassPermissions", root=tmp_path, deny=["Read(./secret.txt)"], allow=["Read(./secret.txt)"]
    )
    assert check(gate, "Read", file_path=str(tmp_path / "link.txt")).behavior == "deny"


def test_wholly_denied_tools_are_withheld() -> None:
    from speculate.mcp.tool import McpTool
    from speculate.tools import default_tools

    class Spec:
        description, input_schema, annotations = "", {"type": "object"}, None

        def __init__(self, name: str) -> None:
            self.name = name

    mcp = [
        McpTool(server=s, spec=Spec(t), client=None)
        for s, t in (
            ("demo", "lookup"),
            ("demo2", "lookup"),
            ("demo2", "bump"),
            ("demo3", "x"),
            ("demo4", "x"),
        )
    ]
    deny = ["Grep", "Bash(*)", "Read(**)", "Edit(src/**)", "mcp__demo", "mcp__demo2__lookup", "mcp__demo3__*"]
    gate = PermissionGate(deny=deny)
    names = [t.name for t in gate.offered([*default_tools(), *mcp])]
    # Read(**) and Edit(src/**) refuse some calls, not the tool: it stays (Claude Code keeps Read too).
    kept = [t.name for t in default_tools() if t.name not in ("Grep", "Bash")]  # in the registry's order
    assert kept[:4] == ["Read", "Write", "Edit", "Glob"]
    assert names == [*kept, "mcp__demo2__bump", "mcp__demo4__x"]
    assert gate.withheld("Grep") == Rule("Grep", None, "Grep")
    # speculate applies a bare rule to every tool it covers (Claude Code withholds only the named tool).
    assert [t.name for t in PermissionGate(deny=["Read"]).offered(default_tools())] == ["Bash"]
    assert [t.name for t in PermissionGate(deny=["Edit"]).offered(default_tools())] == [
        "Read",
        "Glob",
        "Grep",
        "Bash",
    ]
