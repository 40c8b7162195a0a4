"""The rule context: the verdict so far and the callbacks per-command rules make.

:class:`Context` implements :class:`speculate.shell.args.Ctx`. It owns what a command *does* once its
words are known: the worst level seen (stopping the walk at the first risky part), whether a write lands
inside the sandbox, what `cd` does to the possible working directories, which variables may not be set,
and how a command named by argv runs (a shell function, a system binary, a project script or a rule from
:mod:`speculate.shell.rules`). Reading the syntax tree is :class:`speculate.shell.walk.Walker`'s job.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

import tree_sitter

from speculate.errors import SpeculateError
from speculate.shell import rules
from speculate.shell.paths import NO_ROOT, NULL_SINKS, locate, normalize


class Level(IntEnum):
    READ_ONLY = 0
    SANDBOXABLE = 1
    RISKY = 2


class Stop(SpeculateError):
    """Raised to end the walk early once a command is known to be risky."""


_MAX_DEPTH = 6
_MAX_SCRIPT_BYTES = 64 * 1024
_SYSTEM_BIN_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin", "/opt/homebrew/bin"}
)
# Variables that change what later commands run or where they write.
_DANGEROUS_VARS = frozenset(
    {
        "PATH",
        "IFS",
        "HOME",
        "CDPATH",
        "ENV",
        "BASH_ENV",
        "PROMPT_COMMAND",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "TMPDIR",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "PYTHONSTARTUP",
        "NODE_OPTIONS",
        "LESSOPEN",
        "LESSCLOSE",
        "PERL5OPT",
        "RUBYOPT",
        "SSH_ASKPASS",
        "GLOBIGNORE",
        "PYTHONPATH",
        "GCONV_PATH",
    }
)
_DANGEROUS_VAR_PREFIXES = ("LD_", "DYLD_", "GIT_", "BASH_FUNC_", "XDG_")
_FD_SINK = re.compile(r"/dev/fd/[0-9]+")  # a descriptor the shell already has open


class Context:
    """Accumulates the worst verdict over one command line; the context the rules call back into.

    The syntax walk (:meth:`visit`, :meth:`script`) is provided by the subclass
    :class:`speculate.shell.walk.Walker`: shell functions and project scripts are walked like the command.
    """

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

    def visit(self, node: tree_sitter.Node) -> None:
        raise NotImplementedError

    def script(self, text: str, *, subshell: bool) -> None:
        """Parse and walk a literal script (bash -c, eval, trap); ``subshell`` keeps `cd` local."""
        raise NotImplementedError

    # -- verdicts ----------------------------------------------------------------------------------

    def note(self, level: Level, reason: str) -> None:
        if level > self.level:
            self.level, self.reason = level, f"`{self.current}`: {reason}" if self.current else reason
        if level is Level.RISKY:
            raise Stop

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
        if re.match(rb"#!.*\b(ba|da|z|k)?sh\b", first) or (
            name.endswith(".sh") and not first.startswith(b"#!")
        ):
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

    # -- nesting -----------------------------------------------------------------------------------

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
