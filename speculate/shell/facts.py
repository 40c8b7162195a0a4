"""What a command line runs and touches, as the permission gate needs it: every simple command (wrappers,
variable prefixes, quoting and system paths stripped from its name), where it sits (inside a wrapper, a
``sh -c`` script, a substitution), which files it reads and writes, and what makes it impossible to check.

:func:`analyze` walks the tree-sitter parse with the same walker and per-command rules as
:func:`speculate.shell.classify` (so ``nice``, ``timeout``, ``xargs``, ``find -exec``, ``sh -c``, ``eval``,
functions and project scripts are followed into), but records instead of stopping at the first risky
part: a deny rule must see every command, including the ones after something unreadable.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import tree_sitter

from speculate.shell.args import source, split, word
from speculate.shell.classify import MAX_DEPTH, syntax_depth
from speculate.shell.context import Level, Stop
from speculate.shell.paths import NULL_SINKS, normalize
from speculate.shell.walk import Walker, parse

# Wrappers that run their operand as a command and change nothing about what it may do: an allow rule
# for the inner command covers them (Claude Code 2.1.332: `nice echo hi` under Bash(echo:*) ran; `env echo`,
# `exec echo` and `sh -c 'echo'` asked).
TRANSPARENT = frozenset({"nice", "timeout", "command", "nohup", "time", "stdbuf", "xargs", "builtin"})
# Commands whose operands are files they read: (name, operands to skip first unless a flag gives them).
_PATTERN_FIRST = {"grep": ("-e", "-f", "--regexp", "--file"), "egrep": ("-e", "-f"), "fgrep": ("-e", "-f")}
_PATTERN_FIRST |= {"rg": ("-e", "-f", "--regexp", "--file"), "zgrep": ("-e", "-f")}
_PATTERN_FIRST |= {"sed": ("-e", "-f", "--expression", "--file"), "awk": ("-f", "--file")}
_PATTERN_FIRST |= {"gawk": ("-f", "--file"), "mawk": ("-f",), "jq": ("-f", "--from-file")}
READERS = frozenset(
    """
    cat head tail less more tac rev nl od hexdump xxd strings base64 base32 md5sum sha1sum sha224sum
    sha256sum sha384sum sha512sum cksum b2sum wc sort uniq file stat du ls dir vdir cut fold fmt paste
    column expand unexpand diff cmp comm zcat bzcat xzcat zless tree readlink realpath find cd pushd
    source . bat tsort numfmt look iconv cp install
    """.split()
) | frozenset(_PATTERN_FIRST)
_DQ_ESCAPE = re.compile(r"\\([\\\"$`\n])")  # what a backslash escapes inside double quotes
_BRACE_EXPANSION = re.compile(r"\{[^{}\s'\"]*(,|\.\.)[^{}\s'\"]*\}")  # {a,b}, {1..3}; not find's {}
_MAX_NESTING = 6  # functions, scripts and `sh -c` inside each other, as the classifier follows them
_SYSTEM_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"})
# Options whose value is the next word, per command (so `head -n 5 f` reads f, not 5, and `grep -n x f` reads
# f: -n takes no value there).
_VALUE_OPTS: dict[str, tuple[str, ...]] = {
    "head": ("-n", "-c", "--lines", "--bytes"),
    "tail": ("-n", "-c", "--lines", "--bytes", "-s", "--sleep-interval", "--pid"),
    "grep": ("-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--regexp", "--file", "--max-count"),
    "rg": ("-e", "-f", "-g", "-t", "-T", "-m", "-A", "-B", "-C", "-j", "--glob", "--iglob", "--type"),
    "sed": ("-e", "-f", "-l", "--expression", "--file"),
    "awk": ("-f", "-v", "-F", "--file"),
    "sort": ("-k", "-t", "-o", "-S", "-T", "--key", "--output"),
    "cut": ("-d", "-f", "-b", "-c", "--delimiter", "--fields"),
    "od": ("-A", "-t", "-j", "-N", "-w"),
    "du": ("-d", "-B", "-t", "--max-depth"),
    "ls": ("-I", "-w", "-T", "--ignore"),
    "xxd": ("-c", "-l", "-s", "-g"),
    "stat": ("-c", "--format"),
    "file": ("-m", "-f"),
    "uniq": ("-f", "-s", "-w"),
    "jq": ("--arg", "--argjson", "-f", "--from-file", "--indent"),
    "diff": ("-U", "-C", "--label"),
    "nl": ("-b", "-v", "-i", "-w", "-s"),
    "fold": ("-w",),
    "cp": ("-t", "-S", "--target-directory", "--suffix"),
    "install": ("-t", "-m", "-o", "-g", "-S", "--target-directory", "--mode"),
}
for _name, _alias in (
    ("egrep", "grep"),
    ("fgrep", "grep"),
    ("zgrep", "grep"),
    ("gawk", "awk"),
    ("mawk", "awk"),
):
    _VALUE_OPTS[_name] = _VALUE_OPTS[_alias]
_COPIERS = frozenset({"cp", "install"})  # read every operand but the destination


@dataclass
class Command:
    """One simple command as it will run: ``argv`` with None for a word not known before running."""

    argv: list[str | None]
    source: str
    parent: Command | None = None
    via: str = ""  # how it is reached from its parent: "wrapper", "script" (sh -c, eval, a file), ""
    level: Level = Level.READ_ONLY  # what its own rule found (not its children's)
    prefixed: bool = False  # `FOO=1 cmd`: a variable assignment before the name
    children: list[Command] = field(default_factory=list)
    reads: list[str | None] = field(default_factory=list)  # absolute paths; None: not known

    @property
    def name(self) -> str | None:
        return self.argv[0] if self.argv else None

    @property
    def text(self) -> str:
        """The command as a rule sees it: its words, unquoted, joined by spaces."""
        return " ".join("$?" if a is None else a for a in self.argv)


@dataclass
class Facts:
    """Everything :func:`analyze` found in one command line."""

    commands: list[Command]  # every simple command, nested ones included, in the order they were found
    writes: list[tuple[str | None, str]]  # (absolute path or None, what writes it)
    redirects: list[str | None]  # absolute targets of output redirections to files (a subset of writes)
    opaque: list[str]  # why a part cannot be checked before it runs (substitution, eval, obfuscation, ...)
    parts: list[str]  # the source text of each simple command
    unparsed: bool = False  # the parser met an error: some text may be in no part

    @property
    def tops(self) -> list[Command]:
        return [c for c in self.commands if c.parent is None]

    @property
    def reads(self) -> list[str | None]:
        return [p for c in self.commands for p in c.reads]


class _Collector(Walker):
    """The classifying walker, recording every command instead of stopping at the first risky one."""

    def __init__(self, cwd: str, home: str) -> None:
        super().__init__(cwd, full_sandbox=True)
        self.home = home
        self.commands: list[Command] = []
        self.stack: list[Command] = []
        self.writes: list[tuple[str | None, str]] = []
        self.redirects: list[str | None] = []
        self.opaque: list[str] = []
        self.values: dict[str, str | None] = {}  # variables assigned earlier on the line (None: twice)
        self.pending_via = ""
        self.prefixed = False

    # -- verdicts: recorded, never stopping ---------------------------------------------------------

    def note(self, level: Level, reason: str) -> None:
        if self.stack:
            top = self.stack[-1]
            top.level = max(top.level, level)
        if level > self.level:
            self.level, self.reason = level, f"`{self.current}`: {reason}" if self.current else reason

    def write(self, path: str | None, what: str) -> None:
        if path is not None and (normalize(path) in NULL_SINKS or re.fullmatch(r"/dev/fd/[0-9]+", path)):
            return  # 2>/dev/null, >&2
        for full in self.resolve(path):
            self.writes.append((full, what))
            if what.startswith("redirection"):
                self.redirects.append(full)
        super().write(path, what)

    def resolve(self, path: str | None) -> list[str | None]:
        """The absolute paths ``path`` may name (one per possible working directory; None: unknown)."""
        if path is None:
            return [None]
        if path == "~" or path.startswith("~/"):
            return [posixpath.normpath(self.home + path[1:])]
        if path.startswith("~"):
            return [None]  # ~user
        if path.startswith("/"):
            return [posixpath.normpath(path)]
        return [None if c is None else posixpath.normpath(posixpath.join(c, path)) for c in self.cwds]

    # -- commands -----------------------------------------------------------------------------------

    def run(self, argv: list[str | None]) -> None:
        if not argv:
            return
        name = argv[0]
        if name is not None and "/" in name and posixpath.dirname(posixpath.normpath(name)) in _SYSTEM_DIRS:
            argv = [posixpath.basename(name), *argv[1:]]  # /bin/rm is rm
        parent = self.stack[-1] if self.stack else None
        via = self.pending_via or ("wrapper" if parent is not None else "")
        self.pending_via = ""
        cmd = Command(list(argv), self.current, parent, via, prefixed=self.prefixed and parent is None)
        self.prefixed = False
        if parent is not None:
            parent.children.append(cmd)
        self.commands.append(cmd)
        if argv[0] is None:
            self.opaque.append(f"`{self.current}`: the command name is not known before running")
        elif argv[0] in ("eval", "exec") and len(argv) > 1:
            self.opaque.append(f"`{self.current}`: '{argv[0]}' evaluates arguments as shell code")
        cmd.reads = [p for path in self._read_operands(argv) for p in self.resolve(path)]
        self.stack.append(cmd)
        try:
            super().run(argv)
        finally:
            self.stack.pop()

    def script(self, text: str, *, subshell: bool) -> None:
        self.pending_via = "script"
        try:
            super().script(text, subshell=subshell)
        finally:
            self.pending_via = ""

    def _read_operands(self, argv: list[str | None]) -> list[str | None]:
        name, args = argv[0], argv[1:]
        if name not in READERS:
            return []
        p = split(args, _VALUE_OPTS.get(name, ()))
        operands = list(p.operands)
        if name in _COPIERS:
            given = p.has("-t", "--target-directory")
            return operands if given else operands[:-1]
        if name in _PATTERN_FIRST and operands and not p.has(*_PATTERN_FIRST[name]):
            operands = operands[1:]  # the pattern, script or filter
        if name == "find":  # the start points: operands before the first expression word
            operands = [a for a in args if a is None or not a.startswith(("-", "(", "!", ")"))][:1] or ["."]
        if name in ("ls", "dir", "vdir", "du", "find", "tree") and not operands:
            operands = ["."]
        return operands

    @contextmanager
    def _deeper(self) -> Iterator[None]:
        if self.depth >= _MAX_NESTING:  # a function calling itself, scripts sourcing each other
            self.opaque.append("nested too deeply to follow")
            raise Stop
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    # -- syntax the gate cares about beyond the classifier -------------------------------------------

    def visit(self, node: tree_sitter.Node) -> None:
        kind = node.type
        if kind in ("command_substitution", "process_substitution"):
            self.opaque.append(f"`{source(node).decode(errors='replace')[:60]}`: a nested command in this "
                               "command can't be checked before it runs")  # fmt: skip
        elif kind == "file_redirect" and self._input_redirect(node):
            return
        super().visit(node)

    def _input_redirect(self, node: tree_sitter.Node) -> bool:
        operator = next((c.type for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        if operator != "<" or destination is None:
            return False
        reads = self.resolve(word(destination))
        if self.stack:
            self.stack[-1].reads += reads
        elif self.commands:
            self.commands[-1].reads += reads
        return True

    def _command(self, node: tree_sitter.Node) -> None:
        """The classifier's simple command, with words resolved through variables known on the line
        (``x=rm; $x``, ``a=r; b=m; $a$b``, ``"$PWD/.env"``, ``$HOME``)."""
        self.current = source(node).decode(errors="replace")
        self.parts.append(self.current)
        self.prefixed = any(c.type == "variable_assignment" for c in node.children)
        self._children(node)  # substitutions and prefix assignments run before the command itself
        self.current = source(node).decode(errors="replace")
        name_node = node.child_by_field_name("name")
        if name_node is None:
            self.prefixed = False
            return  # only assignments
        inner = name_node.named_children[0] if name_node.named_children else name_node
        words = [self._value(inner)] + [self._value(a) for a in node.children_by_field_name("argument")]
        self.run(words)

    def _value(self, node: tree_sitter.Node) -> str | None:
        """A word's value before running, or None where it depends on something not known."""
        kind = node.type
        if kind in ("simple_expansion", "expansion"):
            return self._variable(re.sub(r"^\$\{?|\}$", "", source(node).decode(errors="replace")))
        if kind == "string":
            out = []
            for part in node.named_children:
                if part.type == "string_content":
                    out.append(_DQ_ESCAPE.sub(r"\1", source(part).decode(errors="replace")))
                elif (value := self._value(part) if part.type.endswith("expansion") else None) is not None:
                    out.append(value)
                else:
                    return None
            return "".join(out)
        if kind == "concatenation":
            values = [self._value(c) for c in node.named_children]
            return None if None in values else "".join(v for v in values if v is not None)
        return word(node)

    def _variable(self, name: str) -> str | None:
        if name in self.values:
            return self.values[name]
        if name == "HOME":
            return self.home
        if name == "PWD" and len(self.cwds) == 1:
            return next(iter(self.cwds))
        return None

    def _assignment(self, node: tree_sitter.Node) -> None:
        name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        if name is not None and name.type == "variable_name":
            var = source(name).decode()
            # Assigned twice (in two branches, in a loop) it could be either: not known before running.
            self.values[var] = (
                None if var in self.values else (self._value(value) if value is not None else "")
            )
        super()._assignment(node)


def obfuscation(command: str) -> str | None:
    """Claude Code's checks for what a rule cannot see through, on the text outside single quotes: ANSI-C
    quoting (``$'\\x72m'``), ``${…}``, brace expansion (``{a,b}``), a brace next to a quote (``{"a":1}``
    hiding an expansion), backslash-escaped whitespace. None when clean."""
    quote: str | None = None
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote == "'":
            quote = None if c == "'" else quote
        elif c == "\\" and i + 1 < n:
            # A line continuation between words is layout (observed: `echo hi \<newline>> f` ran); one that
            # joins two words, or an escaped blank inside a word, hides where a word ends.
            joins = command[i + 1] != "\n" or (
                i > 0 and not command[i - 1].isspace() and i + 2 < n and not command[i + 2].isspace()
            )
            if quote is None and command[i + 1] in " \t\n" and joins:
                return "Contains backslash-escaped whitespace"
            i += 1
        elif c == "$" and command.startswith("${", i):
            return "A variable in braces in this command can't be checked before it runs"
        elif quote == '"':
            quote = None if c == '"' else quote
        elif c == "$" and command.startswith("$'", i):
            return "Text with escape codes in this command can't be checked before it runs"
        elif c == "{" and quote is None and _BRACE_EXPANSION.match(command, i):
            return "Brace expansion"
        elif c in "'\"":
            if i > 0 and command[i - 1] == "{":
                return "Contains brace with quote character (expansion obfuscation)"
            quote = c
        i += 1
    return None


def analyze(command: str, *, cwd: str | os.PathLike[str], home: str | os.PathLike[str]) -> Facts:
    """The facts of one command line run in ``cwd``; ``home`` is what ``~`` expands to."""
    collector = _Collector(os.fspath(cwd), os.fspath(home))
    if "\0" in command:
        return Facts([], [], [], ["the command contains a NUL byte"], [], True)
    tree = parse(command)
    opaque = collector.opaque
    if (depth := syntax_depth(tree)) > MAX_DEPTH:
        return Facts([], [], [], [f"the command is nested {depth} levels deep"], [], True)
    if tree.root_node.has_error:
        opaque.append("the command cannot be parsed")
    if why := obfuscation(command):
        opaque.append(why)
    try:
        collector.visit(tree.root_node)
    except Stop:  # the nesting bound (_deeper) still stops the walk; it said why
        pass
    except RecursionError:
        opaque.append("nested too deeply to read")
    unparsed = tree.root_node.has_error or bool(
        set(opaque) & {"nested too deeply to follow", "nested too deeply to read"}
    )
    return Facts(collector.commands, collector.writes, collector.redirects, opaque, collector.parts, unparsed)


__all__ = ["READERS", "TRANSPARENT", "Command", "Facts", "analyze", "obfuscation"]
