"""Walk a tree-sitter-bash parse tree and grade every part of a command.

The walker owns the shell-level facts: which simple commands run (in pipelines, lists, subshells,
substitutions, heredocs, function bodies), what the redirections write, what `cd` does to the working
directory and whether a path lands inside the sandbox. What each command *does* with its arguments is
decided by the per-command rules in :mod:`speculate.shell.rules`, which call back into the walker.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache

import tree_sitter
import tree_sitter_bash

from speculate.shell import rules
from speculate.shell.args import word
from speculate.shell.paths import NO_ROOT, NULL_SINKS, locate, normalize


class Level(IntEnum):
    READ_ONLY = 0
    SANDBOXABLE = 1
    RISKY = 2


@dataclass(frozen=True)
class Classification:
    """What running a shell command may do.

    ``read_only``: no writes and no side effects, safe on the real tree. ``sandboxable``: effects confined
    to the project tree and /tmp with no network or system-wide change, safe in an overlay sandbox
    (implied by ``read_only``). ``reason`` names the part that decided it; ``parts`` lists the simple
    commands found, in source order.
    """

    read_only: bool
    sandboxable: bool
    reason: str
    parts: tuple[str, ...] = ()

    @property
    def risky(self) -> bool:
        return not self.sandboxable


_MAX_DEPTH = 6
_MAX_SCRIPT_BYTES = 64 * 1024
_SYSTEM_BIN_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin", "/opt/homebrew/bin"}
)
# Variables that change what later commands run or where they write.
_DANGEROUS_VARS = frozenset(
    {"PATH", "IFS", "HOME", "CDPATH", "ENV", "BASH_ENV", "PROMPT_COMMAND", "PS4", "SHELLOPTS", "BASHOPTS",
     "TMPDIR", "PAGER", "EDITOR", "VISUAL", "PYTHONSTARTUP", "NODE_OPTIONS", "LESSOPEN", "LESSCLOSE",
     "PERL5OPT", "RUBYOPT", "SSH_ASKPASS", "GLOBIGNORE", "PYTHONPATH", "GCONV_PATH"}
)
# Search paths that are harmless when every entry is inside the sandbox (checked per assignment).
_PROJECT_SEARCH_PATHS = frozenset({"PYTHONPATH", "NODE_PATH"})
_DANGEROUS_VAR_PREFIXES = ("LD_", "DYLD_", "GIT_", "BASH_FUNC_", "XDG_")
# Node types that only group other nodes; their children are walked in order.
_STRUCTURAL = frozenset(
    {"program", "list", "compound_statement", "do_group", "if_statement", "elif_clause", "else_clause",
     "while_statement", "c_style_for_statement", "case_statement", "case_item",
     "negated_command", "test_command", "binary_expression", "unary_expression", "ternary_expression",
     "postfix_expression", "parenthesized_expression", "redirected_statement", "herestring_redirect",
     "heredoc_redirect", "heredoc_body", "variable_assignments", "unset_command", "word", "string",
     "raw_string", "concatenation", "simple_expansion", "expansion", "arithmetic_expansion", "number",
     "ansi_c_string", "translated_string", "brace_expression", "command_name", "string_content",
     "variable_name", "subscript", "special_variable_name", "array", "regex", "extglob_pattern",
     "file_descriptor", "test_operator", "heredoc_start", "heredoc_content", "heredoc_end", "comment"}
)
_SCOPED = frozenset({"subshell", "command_substitution", "process_substitution"})
_FD_SINK = re.compile(r"/dev/fd/[0-9]+")  # a descriptor the shell already has open
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>"})


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


class _Stop(Exception):
    """Raised to end the walk early once a command is known to be risky."""


class Walker:
    """Accumulates the worst verdict over one command line; the context the rules call back into."""

    def __init__(self, project_root: str | None, *, full_sandbox: bool = True) -> None:
        self.full_sandbox = full_sandbox
        self.real_root = project_root is not None
        self.root = posixpath.normpath(os.path.abspath(project_root)) if project_root else NO_ROOT
        self.level = Level.READ_ONLY
        self.reason = ""
        self.parts: list[str] = []
        self.names: list[str] = []
        self.cwds: set[str | None] = {self.root}
        self.functions: dict[str, tree_sitter.Node] = {}
        self.depth = 0
        self.current = ""
        self.cd_must_succeed = False  # inside the left operand of `&&`: a failed cd stops the rest

    # -- verdicts ----------------------------------------------------------------------------------

    def note(self, level: Level, reason: str) -> None:
        if level > self.level:
            self.level, self.reason = level, f"`{self.current}`: {reason}" if self.current else reason
        if level is Level.RISKY:
            raise _Stop

    def risky(self, reason: str) -> None:
        self.note(Level.RISKY, reason)

    def sandbox(self, reason: str) -> None:
        self.note(Level.SANDBOXABLE, reason)

    def code(self, reason: str) -> None:
        """The command runs code nobody has read (an interpreter, a build tool, a project script): only the
        full sandbox can contain what it does."""
        if self.full_sandbox:
            self.sandbox(reason)
        else:
            self.risky(f"{reason}, and no sandbox contains it")

    def write(self, path: str | None, what: str) -> None:
        """Record a write to ``path`` (as the command sees it); risky unless it stays in the sandbox."""
        if path is not None:
            path = normalize(path)  # /dev/fd/../../etc/x is /etc/x
            if path in NULL_SINKS or _FD_SINK.fullmatch(path):
                return
        where = self.locate(path)
        if where is None:
            self.sandbox(f"{what} writes {path} inside the sandbox")
        else:
            self.risky(f"{what} writes {where}")

    def locate(self, path: str | None) -> str | None:
        """None when every reading of ``path`` is inside the project or /tmp, else why not."""
        return locate(path, self.cwds, self.root, real_root=self.real_root)

    # -- callbacks for rules -----------------------------------------------------------------------

    def run(self, argv: list[str | None]) -> None:
        """Classify a simple command given as resolved words (from xargs, find -exec, env, ...)."""
        if not argv:
            return
        name = argv[0]
        if name is None:
            self.risky("the command name is not known before running")
            return
        self.names.append(name)
        if name in self.functions:
            with self._deeper():
                self.visit(self.functions[name])
            return
        if "/" in name:
            self._run_path(name, argv[1:])
            return
        rules.lookup(name)(self, name, argv[1:])

    def _run_path(self, name: str, args: list[str | None]) -> None:
        directory, base = posixpath.split(name)
        if posixpath.normpath(directory) in _SYSTEM_BIN_DIRS:
            rules.lookup(base)(self, base, args)
            return
        if self.locate(name) is not None or not self.real_root:
            self.risky(f"runs {name}, a program outside the project")
        if directory.endswith(("/bin", "/.bin")) or directory in ("bin", ".bin"):
            rule = rules.lookup(base)
            if rule is not rules.unknown:  # e.g. .venv/bin/pytest, node_modules/.bin/jest
                rule(self, base, args)
                return
        head = self._read_head(name)
        if head is None:
            self.risky(f"cannot inspect {name}")
            return
        first = head.split(b"\n", 1)[0]
        if re.match(rb"#!.*\b(ba|da|z|k)?sh\b", first) or (name.endswith(".sh") and not first.startswith(b"#!")):
            self.script_file(name)
        elif re.match(rb"#!.*\bpython[0-9.]*\b", first):
            self.code(f"{name} is a project-local Python script")
        else:
            self.risky(f"{name} is an unknown project-local program")

    def _read_head(self, path: str) -> bytes | None:
        full = self._single_path(path)
        if full is None:
            return None
        try:
            if os.path.getsize(full) > _MAX_SCRIPT_BYTES:
                return None
            with open(full, "rb") as f:
                return f.read()
        except OSError:
            return None

    def _single_path(self, path: str) -> str | None:
        fulls = {posixpath.normpath(posixpath.join(c, path)) if c else None for c in self.cwds}
        if len(fulls) != 1 or None in fulls:
            return None
        return fulls.pop()

    def script(self, text: str, *, subshell: bool) -> None:
        """Parse and walk a literal script (bash -c, eval, trap); ``subshell`` keeps `cd` local."""
        tree = _parser().parse(text.encode())
        with self._deeper(), (self._scope() if subshell else _nothing()):
            saved = self.current
            self.visit(tree.root_node)
            self.current = saved

    def script_file(self, path: str | None, *, subshell: bool = True) -> None:
        if path is None or self.locate(path) is not None or not self.real_root:
            self.risky(f"runs the script {path}, which cannot be inspected")
            return
        data = self._read_head(path)
        if data is None:
            self.risky(f"cannot read the script {path}")
            return
        try:
            text = data.decode()
        except UnicodeDecodeError:
            self.risky(f"the script {path} is not text")
            return
        self.script(text, subshell=subshell)

    def cd(self, path: str | None) -> None:
        if path is None or path.startswith("~") or path == "-":
            self.cwds.add(None)
        else:
            moved = {None if c is None else posixpath.normpath(posixpath.join(c, path)) for c in self.cwds}
            # Unless what follows needs it to succeed, cd may fail and leave the directory unchanged.
            self.cwds = moved if self.cd_must_succeed else self.cwds | moved

    @contextmanager
    def cwd(self, path: str | None) -> Iterator[None]:
        """Run a nested command in ``path`` (env -C, make -C, find -execdir)."""
        saved = set(self.cwds)
        if path is None:
            self.cwds = {None}
        else:
            self.cwds = {None if c is None else posixpath.normpath(posixpath.join(c, path)) for c in saved}
        try:
            yield
        finally:
            self.cwds = saved

    def assign(self, name: str) -> None:
        if name in _DANGEROUS_VARS or name.startswith(_DANGEROUS_VAR_PREFIXES):
            self.risky(f"sets {name}, which changes what later commands run or where they write")

    # -- tree walk ---------------------------------------------------------------------------------

    @contextmanager
    def _deeper(self) -> Iterator[None]:
        if self.depth >= _MAX_DEPTH:
            self.risky("nested too deeply to follow")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    @contextmanager
    def _scope(self) -> Iterator[None]:
        saved = set(self.cwds)
        try:
            yield
        finally:
            self.cwds = saved

    def visit(self, node: tree_sitter.Node) -> None:
        kind = node.type
        if self.cd_must_succeed and kind not in ("command", "redirected_statement", "list", "command_name",
                                                 "word", "string", "raw_string", "concatenation"):
            self.cd_must_succeed = False
            try:
                self.visit(node)
            finally:
                self.cd_must_succeed = True
            return
        if kind == "list" and not node.has_error:
            self._list(node)
            return
        if node.is_missing or kind == "ERROR":
            self.risky(f"cannot parse near {node.text.decode(errors='replace')[:40]!r}")
        if not node.is_named:
            return
        if kind == "command":
            self._command(node)
        elif kind == "file_redirect":
            self._redirect(node)
        elif kind in _SCOPED:
            with self._scope():
                self._children(node)
        elif kind == "pipeline":
            for child in node.named_children:
                with self._scope():
                    self.visit(child)
        elif kind == "variable_assignment":
            self._assignment(node)
        elif kind == "declaration_command":
            if any(c.type == "word" and c.text.startswith(b"-") and b"n" in c.text for c in node.children):
                self.risky("declares a name reference, which can set any variable")
            self._children(node)
        elif kind == "for_statement":
            variable = node.child_by_field_name("variable")
            if variable is not None:
                self.assign(variable.text.decode())
            self._children(node)
        elif kind == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                self.functions[name.text.decode()] = body
            self._children(node)
        elif kind in _STRUCTURAL:
            self._children(node)
        else:
            self.risky(f"unsupported shell construct {kind}")

    def _children(self, node: tree_sitter.Node) -> None:
        children = node.children
        for k, child in enumerate(children):
            if k + 1 < len(children) and children[k + 1].type == "&" and child.is_named:
                self._background(child)
            else:
                self.visit(child)

    def _list(self, node: tree_sitter.Node) -> None:
        """`a && b`: b runs only if a succeeded, so a `cd` in a surely moved; `a || b`: b runs after a failed
        anywhere. Afterwards any of the directories along the way is possible unless success is required."""
        outer = self.cd_must_succeed
        operator = next((c.type for c in node.children if not c.is_named and c.type in ("&&", "||")), "")
        operands = [c for c in node.named_children if c.type != "comment"]
        if operator not in ("&&", "||") or len(operands) != 2:
            self.risky("unexpected command list shape")
        left, right = operands
        before = set(self.cwds)
        try:
            self.cd_must_succeed = operator == "&&"
            self.visit(left)
            if operator == "||":
                self.cwds |= before
                middle = set(self.cwds)
            self.cd_must_succeed = outer
            self.visit(right)
            if operator == "||":
                self.cwds |= middle
            elif not outer:
                self.cwds |= before
        finally:
            self.cd_must_succeed = outer

    def _background(self, node: tree_sitter.Node) -> None:
        """A job left running after the command returns may write after the sandbox is gone."""
        saved = (self.level, self.reason)
        self.level = Level.READ_ONLY
        self.visit(node)
        if self.level > Level.READ_ONLY:
            self.current = node.text.decode(errors="replace")
            self.risky("runs in the background, beyond the end of the command")
        self.level, self.reason = max(saved, (self.level, self.reason))

    def _assignment(self, node: tree_sitter.Node) -> None:
        name = node.child_by_field_name("name")
        if name is not None:
            target = name.named_children[0] if name.type == "subscript" and name.named_children else name
            var = target.text.decode()
            if not (var in _PROJECT_SEARCH_PATHS and self._search_path_inside(node)):
                self.assign(var)
        self._children(node)

    def _search_path_inside(self, node: tree_sitter.Node) -> bool:
        """A literal search path (``PYTHONPATH=src``) whose every entry lies in the project or /tmp only
        makes the command load code from the sandbox, which it may run anyway."""
        value = node.child_by_field_name("value")
        text = word(value) if value is not None else None
        if not text:
            return False
        return all(entry and self.locate(entry) is None for entry in text.split(":"))

    def _command(self, node: tree_sitter.Node) -> None:
        self.current = node.text.decode(errors="replace")
        self.parts.append(self.current)
        # Substitutions and prefix assignments run before the command itself.
        self._children(node)
        self.current = node.text.decode(errors="replace")
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return  # only assignments
        words = [word(name_node.named_children[0] if name_node.named_children else name_node)]
        words += [word(arg) for arg in node.children_by_field_name("argument")]
        self.run(words)

    def _redirect(self, node: tree_sitter.Node) -> None:
        self._children(node)
        self.current = node.text.decode(errors="replace")
        operator = next((c.type for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        if operator not in _WRITE_REDIRECTS or destination is None:
            return
        target = word(destination)
        if operator == ">&" and (destination.type == "number" or target == "-"):
            return  # duplicates a descriptor: 2>&1, >&2
        self.write(target, f"redirection {operator}")


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def classify(command: str, *, project_root: str | None = None, full_sandbox: bool = True) -> Classification:
    """Classify a shell command line; anything the parser cannot fully read is risky.

    ``full_sandbox`` says whether the command would run in :mod:`overlayfs.sandbox`; without it,
    interpreters, build tools and project scripts are risky, since nothing would contain what they do.
    """
    if not isinstance(command, str):
        raise TypeError(f"command must be a str, got {type(command).__name__}: {command!r}")
    walker = Walker(project_root, full_sandbox=full_sandbox)
    if "\0" in command:
        return Classification(False, False, "the command contains a NUL byte")
    if not command.strip():
        return Classification(True, True, "empty command")
    tree = _parser().parse(command.encode())
    try:
        if tree.root_node.has_error:
            walker.risky("the command cannot be parsed")
        walker.visit(tree.root_node)
    except _Stop:
        pass
    level = walker.level
    reason = walker.reason
    if level is Level.READ_ONLY:
        reason = "read-only: " + (", ".join(dict.fromkeys(walker.names)) or "no commands")
    elif level is Level.SANDBOXABLE:
        reason = "sandboxable: " + reason
    else:
        reason = "risky: " + reason
    return Classification(level is Level.READ_ONLY, level < Level.RISKY, reason, tuple(walker.parts))
