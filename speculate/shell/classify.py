"""Classify a shell command line: read-only, sandboxable or risky, and why.

The public entry point of :mod:`speculate.shell`. :func:`classify` parses the line, lets the walker
(:mod:`speculate.shell.walk`) visit every part with the per-command rules (:mod:`speculate.shell.rules`)
and turns the worst level found (:mod:`speculate.shell.context`) into a :class:`Classification`.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from speculate.shell.context import Level, Stop
from speculate.shell.walk import Walker, parse

__all__ = ["Classification", "Level", "classify"]

MAX_DEPTH = 256  # syntax-tree levels: a chain of 250 `&&` parts, or ~80 nested `$(...)`


def syntax_depth(tree: tree_sitter.Tree) -> int:
    """The deepest node's depth, walked without recursion."""
    cursor, depth, best = tree.walk(), 0, 0
    while True:
        if cursor.goto_first_child():
            depth += 1
            best = max(best, depth)
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return best
            depth -= 1


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
    tree = parse(command)
    depth = syntax_depth(tree)
    if depth > MAX_DEPTH:  # the walk recurses per level: refuse to read it rather than overflow the stack
        return Classification(
            False,
            False,
            f"risky: the command is nested {depth} levels deep (syntax tree); "
            f"deeper than {MAX_DEPTH} is not read",
        )
    try:
        if tree.root_node.has_error:
            walker.risky("the command cannot be parsed")
        walker.visit(tree.root_node)
    except Stop:
        pass
    except RecursionError:  # a backstop: a shape the depth bound did not foresee
        return Classification(False, False, "risky: the command is nested too deeply to read")
    level = walker.level
    reason = walker.reason
    if level is Level.READ_ONLY:
        reason = "read-only: " + (", ".join(dict.fromkeys(walker.names)) or "no commands")
    elif level is Level.SANDBOXABLE:
        reason = "sandboxable: " + reason
    else:
        reason = "risky: " + reason
    return Classification(level is Level.READ_ONLY, level < Level.RISKY, reason, tuple(walker.parts))
