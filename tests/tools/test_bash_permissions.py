"""The gate's Bash decisions on the parse (speculate.permission_bash, speculate.shell.facts): each construct
that evaded a deny rule or let an allow rule overreach on the text-based gate (issue #33), with what Claude
Code 2.1.332 decided for it (the differential corpus, tests/permissions/, checks the same against the CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from speculate.permissions import PermissionGate
from speculate.sensitive import is_sensitive
from speculate.shell.facts import analyze
from speculate.speculation.guard import Protection
from speculate.tools import tools_by_name

TOOLS = tools_by_name()


def gate(tmp_path: Path, **kw: Any) -> PermissionGate:
    (tmp_path / "p").mkdir(exist_ok=True)
    return PermissionGate(root=tmp_path / "p", home=tmp_path / "h", **kw)


def bash(g: PermissionGate, command: str, **kw: Any) -> str:
    return g.check(TOOLS["Bash"], {"command": command}, **kw).behavior


RM_SPELLINGS = [
    "rm a.txt",
    "FOO=1 rm a.txt",
    "command rm a.txt",
    "env rm a.txt",
    "nice rm a.txt",
    "timeout 5 rm a.txt",
    "nohup rm a.txt",
    "time rm a.txt",
    "stdbuf -o0 rm a.txt",
    "exec rm a.txt",
    "builtin rm a.txt",
    "echo a.txt | xargs rm",
    "\\rm a.txt",
    "/bin/rm a.txt",
    "/usr/bin/rm a.txt",
    "r''m a.txt",
    '"rm" a.txt',
    "(rm a.txt)",
    "{ rm a.txt; }",
    "if true; then rm a.txt; fi",
    "for f in a.txt; do rm $f; done",
    "while false; do rm a.txt; done",
    "case x in x) rm a.txt;; esac",
    "echo $(rm a.txt)",
    "echo `rm a.txt`",
    "cat <(rm a.txt)",
    "sh -c 'rm a.txt'",
    "bash -c 'rm a.txt'",
    "eval 'rm a.txt'",
    "x=rm; $x a.txt",
    "true && rm a.txt",
    "ls | rm a.txt",
    "find . -name a.txt -exec rm {} \\;",
]


@pytest.mark.parametrize("command", RM_SPELLINGS)
def test_a_deny_rule_holds_whatever_the_spelling(tmp_path: Path, command: str) -> None:
    for mode in ("default", "bypassPermissions", "acceptEdits"):
        g = gate(tmp_path, mode=mode, allow=["Bash"], deny=["Bash(rm:*)"])
        assert bash(g, command) == "deny", (mode, command)


def test_a_deny_rule_sees_through_git_prefixes_and_global_options(tmp_path: Path) -> None:
    g = gate(tmp_path, allow=["Bash"], deny=["Bash(git push:*)"])
    for command in (
        "GIT_DIR=.git git push",
        "git -C . push origin",
        "git -c k=v push",
        "git status && git push",
    ):
        assert bash(g, command) == "deny", command
    assert bash(g, "git status") == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "echo hi > f.txt",
        "ls >> f.txt",
        "echo x >> ~/.bashrc",
        "echo key >> ~/.ssh/authorized_keys",
        "cat /etc/hostname",
        "cat ../x",
        "cat ~/secret.txt",
        "ls /",
        "env echo hi",
        "FOO=1 echo hi",
        "sh -c 'echo hi'",
        "echo hi | tee f",
        "echo $(whoami)",
        'echo {"a":1} # x',
        "echo $'\\x72m'",
        "echo hi\\ there",
        "$CMD",
    ],
)
def test_allow_rules_do_not_cover_redirections_outside_reads_or_what_cannot_be_checked(
    tmp_path: Path, command: str
) -> None:
    g = gate(tmp_path, allow=["Bash(echo:*)", "Bash(cat:*)", "Bash(ls:*)"])
    assert bash(g, command) == "ask", command


@pytest.mark.parametrize(
    "command",
    ["echo hi", "nice echo hi", "timeout 5 echo hi", "echo hi > /dev/null", "ls | grep x", "echo $HOME"],
)
def test_allow_rules_still_cover_what_claude_code_lets_through(tmp_path: Path, command: str) -> None:
    g = gate(tmp_path, allow=["Bash(echo:*)", "Bash(cat:*)", "Bash(ls:*)"])
    assert bash(g, command) == "allow", command


@pytest.mark.parametrize(
    "command, expected",
    [
        ("ls", "allow"),
        ("cat a.txt", "allow"),
        ("git status", "allow"),
        ("grep -r x .", "allow"),
        ("cd sub && ls", "allow"),
        ("env", "ask"),
        ("printenv", "ask"),
        ("awk '{print}' a.txt", "ask"),
        ("uniq a.txt", "ask"),
        ("less a.txt", "ask"),
        ("npm ls", "ask"),
        ("pip list", "ask"),
        ("ls /", "ask"),
        ("head /etc/passwd", "ask"),
        ("cat ~/.aws/credentials", "ask"),
        ("find . -delete", "ask"),
    ],
)
def test_default_mode_runs_only_claude_codes_read_only_commands_inside_the_project(
    tmp_path: Path, command: str, expected: str
) -> None:
    assert bash(gate(tmp_path), command) == expected


@pytest.mark.parametrize(
    "command, expected",
    [
        ("mkdir -p d", "allow"),
        ("touch t", "allow"),
        ("rm -rf build", "allow"),
        ("echo hi > f", "allow"),
        ("sed -i s/a/b/ c", "allow"),
        ("rm -rf .", "ask"),
        ("rm -rf *", "ask"),
        ("cp -r a b", "ask"),
        ("sed -i.bak s/a/b/ c", "ask"),
        ("mkdir ../outside", "ask"),
        ("echo hi > /tmp/out", "ask"),
        ("echo x > .git/hooks/pre-commit", "ask"),
        ("eval 'echo hi'", "ask"),
    ],
)
def test_accept_edits_lets_file_commands_through_inside_the_working_directories(
    tmp_path: Path, command: str, expected: str
) -> None:
    assert bash(gate(tmp_path, mode="acceptEdits"), command) == expected


def test_read_and_edit_deny_rules_reach_bash_ignoring_case_and_through_globs(tmp_path: Path) -> None:
    g = gate(tmp_path, allow=["Bash"], deny=["Read(.env)", "Read(secrets/**)", "Edit(conf/**)"])
    (tmp_path / "p" / "secrets").mkdir()
    (tmp_path / "p" / "secrets" / "a.txt").write_text("s3cret\n")
    for command in ("cat .env", "head -1 .ENV", "grep x secrets/a.txt", "cat s*/a.txt", "sort < .env"):
        assert bash(g, command) == "deny", command
    for command in (
        "echo x > conf/c.txt",
        "cp a.txt conf/c.txt",
        "echo x | tee conf/c.txt",
        "sed -i s/a/b/ conf/c",
    ):
        assert bash(g, command) == "deny", command
    assert bash(g, "cat $F") == "ask"  # a file not known before it runs, where Read deny rules apply
    assert bash(g, "cat a.txt") == "allow"


def test_path_rules_ignore_case(tmp_path: Path) -> None:
    g = gate(tmp_path, deny=["Read(Private.txt)"])
    for name in ("private.txt", "PRIVATE.TXT", "sub/Private.txt"):
        assert g.check(TOOLS["Read"], {"file_path": str(tmp_path / "p" / name)}).behavior == "deny", name


@pytest.mark.parametrize(
    "rel",
    [
        ".claude/settings.local.json",
        ".claude/commands/x.md",
        ".git/hooks/pre-commit",
        ".bashrc",
        ".zshrc",
        ".profile",
        ".mcp.json",
        ".vscode/settings.json",
        ".gitconfig",
        ".gitmodules",
        ".husky/pre-commit",
        ".ripgreprc",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        ".devcontainer/devcontainer.json",
        "sub/.GIT/config",
        ".BASHRC",
    ],
)
def test_sensitive_files_ask_under_accept_edits_allow_rules_and_hooks_but_not_in_bypass(
    tmp_path: Path, rel: str
) -> None:
    path = str(tmp_path / "p" / rel)
    write = {"file_path": path, "content": "x"}
    for g in (
        gate(tmp_path, mode="acceptEdits"),
        gate(tmp_path, mode="acceptEdits", allow=["Edit(**)", "Write"]),
    ):
        d = g.check(TOOLS["Write"], write)
        assert d.behavior == "ask" and d.firm and "sensitive file" in d.reason, (rel, d)
    assert bash(gate(tmp_path, mode="acceptEdits", allow=["Bash(echo:*)"]), f"echo x > {path}") == "ask"
    assert gate(tmp_path, mode="bypassPermissions").check(TOOLS["Write"], write).behavior == "allow"
    # The speculation guard uses the same list: a fork never writes one.
    assert Protection().kind(rel) == "protected" and is_sensitive(rel)


def test_a_project_below_a_sensitive_directory_is_not_itself_sensitive(tmp_path: Path) -> None:
    root = tmp_path / ".claude" / "projects" / "p"
    root.mkdir(parents=True)
    g = PermissionGate(root=root, home=tmp_path, mode="acceptEdits")
    assert g.check(TOOLS["Write"], {"file_path": str(root / "a.txt"), "content": "x"}).behavior == "allow"


def test_reads_and_writes_outside_the_working_directories_ask_unless_added(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    read = {"file_path": str(tmp_path / "other" / "x.txt")}
    assert gate(tmp_path).check(TOOLS["Read"], read).behavior == "ask"
    added = gate(tmp_path, additional_dirs=[tmp_path / "other"])
    assert added.check(TOOLS["Read"], read).behavior == "allow"
    assert bash(added, f"cat {tmp_path}/other/x.txt") == "allow"
    write = {"file_path": str(tmp_path / "out.txt"), "content": "x"}
    assert gate(tmp_path, mode="acceptEdits").check(TOOLS["Write"], write).behavior == "ask"


def test_dont_ask_turns_asks_into_denials_and_plan_refuses_writes(tmp_path: Path) -> None:
    g = gate(tmp_path, mode="dontAsk")
    assert bash(g, "mkdir d") == "deny" and bash(g, "ls") == "allow"
    p = gate(tmp_path, mode="plan")
    assert bash(p, "echo x > f") == "deny" and bash(p, "cat a.txt") == "allow"


def test_relative_paths_resolve_from_the_bash_working_directory(tmp_path: Path) -> None:
    g = gate(tmp_path, deny=["Read(sub/secret.txt)"], allow=["Bash"])
    (tmp_path / "p" / "sub").mkdir()
    assert bash(g, "cat secret.txt", cwd=tmp_path / "p" / "sub") == "deny"
    assert bash(g, "cat secret.txt") == "allow"


def test_the_facts_name_every_command_and_strip_what_hides_it() -> None:
    f = analyze("FOO=1 nice /bin/rm -f 'a b' && sh -c 'git push' | xargs r''m", cwd="/p", home="/h")
    assert [c.text for c in f.commands] == [
        "nice /bin/rm -f a b",  # the wrapper's words as written; the command it runs without the path
        "rm -f a b",
        "sh -c git push",
        "git push",
        "xargs rm",
        "rm $?",
    ]
    assert f.tops[0].prefixed and ("/p/a b", "rm") in f.writes


def test_decisions_are_fast_enough_to_sit_before_every_call(tmp_path: Path) -> None:
    """Not a timing test: the parse must not be quadratic in a long but ordinary command line."""
    g = gate(tmp_path, allow=["Bash(echo:*)"], deny=["Bash(rm:*)"])
    long = " && ".join(f"echo {i}" for i in range(200))
    assert bash(g, long) == "allow" and bash(g, long + " && rm x") == "deny"


def test_what_the_corpus_found_on_the_first_parse_based_gate(tmp_path: Path) -> None:
    """The 43 looser calls of the differential corpus on 2df2e36, one of each kind."""
    deny = gate(tmp_path, allow=["Bash"], deny=["Bash(rm:*)"])
    assert bash(deny, "a=r; b=m; $a$b x.txt") == "deny"  # concatenated variables resolved
    assert bash(deny, "if true; then x=rm; else x=ls; fi; $x a") == "ask"  # assigned twice: not known
    echo = gate(tmp_path, allow=["Bash(echo:*)"])
    assert bash(echo, "echo {a,b}.txt") == "ask" and bash(echo, "echo ${HOME}") == "ask"
    assert bash(echo, "echo hi \\\n> f.txt") == "ask"  # a line continuation is layout; the redirection asks
    reads = gate(tmp_path, deny=["Read(.env)", "Read(secrets/**)"])
    for command in ("sed -n 1p .env", "od -c .env", "wc -c .env", 'cat "$PWD/.env"', "cp .env leak.txt",
                    "grep -rn s3 secrets", "ls secrets", "find secrets -type f"):  # fmt: skip
        assert bash(reads, command) == "deny", command
    for rel in (
        ".claude.json",
        "pyrightconfig.json",
        "bunfig.toml",
        ".cargo/config.toml",
        ".config/git/config",
    ):
        assert is_sensitive(rel) and bash(gate(tmp_path, mode="acceptEdits"), f"echo x > {rel}") == "ask"
    find = gate(tmp_path, allow=["Bash(find:*)", "Bash(echo:*)"])
    assert bash(find, "find . -exec echo {} \\;") == "ask"  # no prefix rule covers find -exec
    plain = gate(tmp_path)
    assert [bash(plain, c) for c in ("git status", "git config user.name", "git stash pop", "whoami")] == [
        "allow",
        "ask",
        "ask",
        "allow",
    ]


def test_in_dont_ask_a_refused_ask_is_marked_so_a_hook_can_still_answer_it(tmp_path: Path) -> None:
    g = gate(tmp_path, mode="dontAsk")
    d = g.check(TOOLS["Write"], {"file_path": str(tmp_path / "p" / "w.txt"), "content": "x"})
    assert d.behavior == "deny" and d.unasked and not d.firm
    sensitive = g.check(TOOLS["Write"], {"file_path": str(tmp_path / "p" / ".bashrc"), "content": "x"})
    assert sensitive.behavior == "deny" and sensitive.firm  # a hook's allow does not answer this one
    ruled = gate(tmp_path, mode="dontAsk", deny=["Write"]).check(TOOLS["Bash"], {"command": "ls"})
    assert not ruled.unasked
