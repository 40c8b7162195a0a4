"""The permission gate's decision for a Bash command, made on the parse (:mod:`speculate.shell.facts`), not
the text: what Claude Code 2.1.332 decides, or stricter.

- **Deny** when a Bash deny rule matches *any* simple command anywhere in the line: inside lists,
  pipelines, subshells, groups, ``if``/``for``/``while``/``case`` bodies, substitutions, ``sh -c`` and
  ``eval`` scripts, behind wrappers (``command``, ``env``, ``nice``, ``timeout``, ``xargs``, ``find
  -exec`` …) and variable prefixes, with the name unquoted (``r''m``, ``\\rm``) and system paths stripped
  (``/bin/rm``); also when a Read deny rule covers a file the command reads, or an Edit (or Read) deny
  rule a file it writes.
- **Ask** when an ask rule matches a part, when it writes a sensitive file (:mod:`speculate.sensitive`, in
  every mode but ``bypassPermissions``), or when no allow covers it.
- **Allow** under a bare ``Bash`` allow rule, an exact rule for the whole line, ``bypassPermissions``, or
  when every simple command is covered (an allow rule for it, a read-only command Claude Code runs
  without asking, or in ``acceptEdits`` a file command inside the working directories), nothing writes to
  a file by redirection (``acceptEdits``: inside the working directories), every file read lies inside the
  working directories, and nothing is opaque (substitutions, ``eval``/``exec``, an unknown command name,
  Claude Code's obfuscation patterns).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from speculate.permission_rules import Decision, Rule, bash_match, path_match, split_command
from speculate.permission_rules import Places as RulePlaces
from speculate.sensitive import sensitive_segment
from speculate.shell.context import Level
from speculate.shell.facts import TRANSPARENT, Command, Facts, analyze
from speculate.tools.globmatch import has_magic
from speculate.tools.registry import EDIT_RULES, PATH_FIELDS, READ_RULES, SHELL


class Gate(Protocol):
    """What a decision reads of :class:`speculate.permissions.Gate`."""

    @property
    def mode(self) -> str: ...
    @property
    def allow(self) -> tuple[Rule, ...]: ...
    @property
    def deny(self) -> tuple[Rule, ...]: ...
    @property
    def ask(self) -> tuple[Rule, ...]: ...
    @property
    def places(self) -> RulePlaces: ...
    @property
    def additional_dirs(self) -> tuple[Path, ...]: ...


# What Claude Code 2.1.332 runs without asking in default mode, with no rules (probed one by one against the
# simulator: docs/claude-code.md). Left out on purpose, since it asked: env, printenv, awk, uniq, less,
# more, zcat, whereis, join, cksum, b2sum, base32, locate, xxd, tty, who, getconf, shellcheck.
READ_ONLY_COMMANDS = frozenset(
    """
    cat head tail wc ls grep egrep fgrep rg find du df echo true false test [ which basename dirname
    realpath readlink uname id groups diff cmp comm cut tr nl fold fmt paste column rev tac od hexdump
    strings md5sum sha1sum sha256sum base64 expr sort stat file pgrep free uptime seq sleep nproc locale
    man help lsof numfmt tsort type expand unexpand ps date hostname pwd jq git cd whoami python python3
    """.split()
)
# git subcommands that only read (observed: status, log, diff, branch, remote, stash list, tag, show ran; `git
# config user.name` asked).
READ_ONLY_GIT = frozenset(
    "status log diff show branch tag remote stash rev-parse ls-files ls-tree blame describe shortlog reflog "
    "cat-file grep rev-list merge-base name-rev count-objects".split()
)
_FIND_ACTIONS = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
# acceptEdits also runs these, with these options only, when what they write lies inside the working
# directories (observed: `mkdir -p`, `touch`, `rm -rf build`, `cp`, `mv`, `sed -i` and a redirection ran;
# `cp -r`, `sed -i.bak`, `chmod`, `ln -s`, `truncate`, the same commands outside, and an `rm` of a working
# directory itself or all of it (`rm -rf .`, `rm -rf *`) asked).
ACCEPT_EDITS_COMMANDS: dict[str, frozenset[str]] = {
    "mkdir": frozenset({"-p", "--parents", "-v"}),
    "touch": frozenset(),
    "rm": frozenset({"-r", "-R", "-f", "-rf", "-fr", "-Rf", "-fR", "-v", "--recursive", "--force"}),
    "rmdir": frozenset({"-p"}),
    "mv": frozenset(),
    "cp": frozenset(),
    "sed": frozenset({"-i", "--in-place", "-e", "-E", "-r", "-n"}),
}


@dataclass(frozen=True)
class Places:
    """Where a command runs and what it may reach without asking."""

    cwd: str  # the Bash tool's current directory
    home: str
    working: tuple[str, ...]  # the working directories: the project and additionalDirectories


def decide(gate: Gate, command: str, *, cwd: str | os.PathLike[str] | None) -> Decision:
    places = Places(
        os.path.abspath(cwd) if cwd is not None else str(gate.places.cwd),
        str(gate.places.home),
        (str(gate.places.cwd), *map(str, gate.additional_dirs)),
    )
    facts = analyze(command, cwd=places.cwd, home=places.home)
    reads = [p for raw in facts.reads for p in _expand(raw)]
    writes = [(p, what) for raw, what in facts.writes for p in _expand(raw)]
    texts = _texts(command, facts)

    # -- deny: any part, any file rule that reaches it --------------------------------------------------
    for r in _rules(gate.deny, SHELL, denying=True):
        if r.specifier is None or any(bash_match(r, t) for t in texts):
            return Decision("deny", f"Permission to use Bash was denied by rule {r.text!r}.", r.text)
    for path in reads:
        if path is not None and (pr := _path_rule(gate, gate.deny, READ_RULES, path, denying=True)):
            return Decision("deny", f"Permission to read {path} has been denied (rule {pr.text!r}).", pr.text)
    for path, what in writes:
        if path is not None and (pr := _path_rule(gate, gate.deny, EDIT_RULES, path, denying=True)):
            return Decision(
                "deny", f"Permission to edit {path} has been denied ({what}, rule {pr.text!r}).", pr.text
            )

    read_only = _read_only(facts)
    if gate.mode == "plan" and not read_only:
        return Decision(
            "deny",
            "Plan mode: no changes allowed, so this Bash command that may change state was refused. "
            "Only read-only tools may run.",
        )

    # -- ask: rules, sensitive files, what cannot be checked --------------------------------------------
    for r in _rules(gate.ask, SHELL):
        if r.specifier is None or any(bash_match(r, t) for t in texts):
            return Decision("ask", f"Rule {r.text!r} requires confirmation for Bash.", r.text, firm=True)
    for path in reads:
        if path is not None and (pr := _path_rule(gate, gate.ask, READ_RULES, path)):
            return Decision(
                "ask", f"Rule {pr.text!r} requires confirmation to read {path}.", pr.text, firm=True
            )
    for path, _ in writes:
        if path is not None and (pr := _path_rule(gate, gate.ask, EDIT_RULES, path)):
            return Decision(
                "ask", f"Rule {pr.text!r} requires confirmation to edit {path}.", pr.text, firm=True
            )
    if gate.mode != "bypassPermissions":
        for path, _ in writes:
            if path is not None and sensitive_path(path, places):
                return Decision(
                    "ask",
                    f"Claude requested permissions to edit {path} which is a sensitive file.",
                    firm=True,
                )
        if None in reads and any(r.tool == READ_RULES and r.specifier for r in gate.deny):
            return Decision(
                "ask", "A file this command reads is not known before it runs, and Read deny rules apply."
            )

    # -- allow ---------------------------------------------------------------------------------------------
    allow = _rules(gate.allow, SHELL)
    unnamed = next((c for c in facts.commands if c.name is None), None)
    if unnamed is not None and gate.mode != "bypassPermissions" and _rules(gate.deny, SHELL, denying=True):
        # A deny rule cannot be checked against a command whose name is not known before running.
        return Decision(
            "ask",
            f"`{unnamed.source}`: the command name is not known before running, and Bash deny rules apply.",
        )
    if rule := next((r for r in allow if r.specifier is None), None):
        return Decision("allow", f"Allowed by rule {rule.text!r}.", rule.text)
    exact = next((r for r in allow if "*" not in (r.specifier or "*") and bash_match(r, command)), None)
    if exact is not None and not facts.opaque:
        return Decision("allow", f"Allowed by rule {exact.text!r}.", exact.text)
    if gate.mode == "bypassPermissions":
        return Decision("allow", "bypassPermissions mode.")
    if why := _unchecked(gate, facts, reads, places):
        return Decision("ask", why)
    uncovered = next((c for c in facts.tops if not _covered(gate, c, allow, writes, places)), None)
    if uncovered is not None:
        return Decision("ask", f"This command requires approval: {uncovered.source or uncovered.text}")
    used = next((r for r in allow if any(bash_match(r, c.text) for c in facts.commands)), None)
    if used is not None:
        return Decision("allow", f"Allowed by rule {used.text!r}.", used.text)
    return Decision(
        "allow", "Bash command is read-only." if read_only else "acceptEdits mode allows file edits."
    )


def _texts(command: str, facts: Facts) -> list[str]:
    """Every text a Bash rule is matched against: each simple command as it runs, each part as written,
    and the whole line."""
    runs = [c.text for c in facts.commands if c.name is not None]
    gits = [_git_subcommand(c) for c in facts.commands if c.name == "git"]
    # Where the parse failed, the text split too: a part the parser lost must still meet the deny rules.
    parts = split_command(command)[0] if facts.unparsed else []
    return [*runs, *(g for g in gits if g), *facts.parts, *parts, command]


_GIT_VALUE_OPTS = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}
)


def _git_words(cmd: Command) -> list[str | None]:
    """git's words after its global options (``-C .``, ``-c k=v``, ``--git-dir=…``): the subcommand first."""
    args, i = cmd.argv[1:], 0
    while i < len(args) and (a := args[i]) is not None and a.startswith("-"):
        i += 2 if a in _GIT_VALUE_OPTS else 1
    return args[i:]


def _git_subcommand(cmd: Command) -> str | None:
    """``git -C . -c k=v push`` as ``git push``: global options must not hide a subcommand a rule names."""
    words = _git_words(cmd)
    if not words or len(words) == len(cmd.argv) - 1:
        return None  # no global options: the command's own text already says it
    return " ".join("$?" if a is None else a for a in ["git", *words])


def _rules(rules: Iterable[Rule], tool: str, *, denying: bool = False) -> list[Rule]:
    return [r for r in rules if r.covers(tool, denying=denying)]


def _path_rule(
    gate: Gate, rules: Sequence[Rule], as_tool: str, path: str, *, denying: bool = False
) -> Rule | None:
    """The first path rule (Read, Edit, Write) that covers ``path`` as ``as_tool`` would use it."""
    for r in rules:
        if r.specifier is None or not r.covers(as_tool, denying=denying) or r.tool.startswith("mcp__"):
            continue
        # A directory read (`ls secrets`, `grep -r x secrets`) is refused when a rule covers its contents.
        if r.tool in PATH_FIELDS and any(
            path_match(r, p, gate.places, directory=as_tool == READ_RULES)
            for p in {path, os.path.realpath(path)}
        ):
            return r
    return None


def _expand(path: str | None) -> list[str | None]:
    """A path as the shell will see it: a glob is expanded against the disk now (the pattern stays too)."""
    if path is None or not has_magic(path):
        return [path]
    return [path, *sorted(glob.glob(path))[:1000]]


def inside(path: str, working: Iterable[str]) -> bool:
    """Whether ``path`` (absolute) lies in one of the working directories, as written and resolved."""
    forms = {os.path.normpath(path), os.path.realpath(path)}
    return all(any(f == d or f.startswith(d.rstrip("/") + "/") for d in working) for f in forms)


def sensitive_path(path: str, places: Places) -> bool:
    # Relative to the working directory or home it sits in: the project itself may live below a directory
    # whose name is on the list (~/.claude/projects/...).
    for base in (*places.working, places.home):
        if path == base or path.startswith(base.rstrip("/") + "/"):
            return sensitive_segment(os.path.relpath(path, base)) is not None
    return sensitive_segment(path) is not None


def _unchecked(gate: Gate, facts: Facts, reads: list[str | None], places: Places) -> str | None:
    """Why no allow rule can cover this line: it cannot be checked, or it reaches outside (Claude Code's
    words where it has them)."""
    if facts.opaque:
        return facts.opaque[0]
    prefixed = next((c for c in facts.tops if c.prefixed), None)
    if prefixed is not None:
        return f"This command requires approval: {prefixed.source} sets variables before the command"
    for target in facts.redirects:
        if target is None:
            return "Output redirection to a path not known before running needs approval."
        if not inside(target, places.working):
            return (
                f"Output redirection to '{target}' needs approval. The path is outside the working "
                f"directories for this session ({_dirs(places)})."
            )
        if gate.mode != "acceptEdits":
            return (
                f"Output redirection to '{target}' needs approval. The path is inside the working "
                f"directories for this session ({_dirs(places)}), and Claude Code asks before a shell "
                "command creates, changes or deletes files."
            )
    for path in reads:
        if path is None:
            return "A file this command reads is not known before it runs."
        if not inside(path, places.working):
            return (
                f"Reading '{path}' was blocked. For security, Claude Code may only read files from the "
                f"allowed working directories for this session: {_dirs(places)}."
            )
    return None


def _dirs(places: Places) -> str:
    return ", ".join(f"'{d}'" for d in places.working)


def _covered(
    gate: Gate,
    cmd: Command,
    allow: Sequence[Rule],
    writes: list[tuple[str | None, str]],
    places: Places,
) -> bool:
    """Whether an allow rule, Claude Code's read-only set or acceptEdits covers ``cmd`` and what it runs."""
    if cmd.name is None or _never_by_rule(cmd):
        return False
    if any(r.specifier is not None and bash_match(r, cmd.text) for r in allow):
        return True
    children = all(_covered(gate, c, allow, writes, places) for c in cmd.children)
    if cmd.name in TRANSPARENT:
        return bool(cmd.children) and children
    if _read_only_command(cmd):
        return children
    if gate.mode == "acceptEdits" and _file_command(cmd, places) and cmd.level <= Level.SANDBOXABLE:
        return children and all(p is not None and inside(p, places.working) for p, _ in writes)
    return False


def _file_command(cmd: Command, places: Places) -> bool:
    """One of acceptEdits's file commands, with only the options Claude Code lets through, and no removal
    of a working directory itself (or of everything in one)."""
    options = ACCEPT_EDITS_COMMANDS.get(cmd.name or "")
    if options is None or any(a is None for a in cmd.argv):
        return False
    args = [a for a in cmd.argv[1:] if a is not None]
    flags = [a for a in args if a.startswith("-") and a != "--"]
    if cmd.name == "sed" and not any(f in ("-i", "--in-place") for f in flags):
        return False  # plain sed writes only to stdout: read-only, but not in Claude Code's set
    if any(f not in options for f in flags):
        return False
    if cmd.name == "rm":
        for a in args:
            if a.startswith("-"):
                continue
            full = os.path.normpath(os.path.join(places.cwd, a))
            if any(full == d or d.startswith(full.rstrip("/") + "/") for d in places.working):
                return False  # the workspace itself, or a directory above it
            if os.path.basename(full) == "*" and os.path.dirname(full) in places.working:
                return False  # everything in a working directory
    return True


def _read_only_command(cmd: Command) -> bool:
    if cmd.name not in READ_ONLY_COMMANDS or cmd.level is not Level.READ_ONLY:
        return False
    if cmd.name == "git":
        words = _git_words(cmd)
        if not words or words[0] not in READ_ONLY_GIT:
            return False
        return words[0] != "stash" or words[1:2] in (["list"], ["show"])
    if cmd.name in ("python", "python3"):
        return cmd.argv[1:] in (["--version"], ["-V"])  # observed: `python3 --version` ran
    # observed: `pwd` and `whoami` ran, `pwd a.txt` and `whoami a.txt` asked
    return not (cmd.name in ("pwd", "whoami") and len(cmd.argv) > 1)


def _never_by_rule(cmd: Command) -> bool:
    """What no prefix rule covers (observed: "find with '-exec' executes commands or modifies files —
    cannot be auto-allowed by a Bash(find:*) prefix rule")."""
    return cmd.name == "find" and any(a in _FIND_ACTIONS for a in cmd.argv[1:])


def _read_only(facts: Facts) -> bool:
    return not facts.writes and all(c.level is Level.READ_ONLY for c in facts.commands)


__all__ = ["ACCEPT_EDITS_COMMANDS", "READ_ONLY_COMMANDS", "Places", "decide", "inside", "sensitive_path"]
