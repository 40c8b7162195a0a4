"""Arguments: the literal value of a parsed word, GNU option splitting, and the rule context protocol."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import tree_sitter

Args = list[str | None]


class Ctx(Protocol):
    """What a rule may report about the command it inspects.

    Implemented by :class:`speculate.shell.context.Context`.
    """

    def risky(self, reason: str) -> None: ...
    def sandbox(self, reason: str) -> None: ...
    def code(self, reason: str) -> None: ...
    def write(self, path: str | None, what: str) -> None: ...
    def locate(self, path: str | None) -> str | None: ...
    def run(self, argv: Args) -> None: ...
    def script(self, text: str, *, subshell: bool) -> None: ...
    def script_file(self, path: str | None, *, subshell: bool = True) -> None: ...
    def cd(self, path: str | None) -> None: ...
    def cwd(self, path: str | None) -> AbstractContextManager[None]: ...
    def assign(self, name: str) -> None: ...


Rule = Callable[[Ctx, str, Args], None]


@dataclass
class Parsed:
    """Options (flag, value) in order and the operands, after GNU-style splitting."""

    opts: list[tuple[str, str | None]] = field(default_factory=list)
    operands: Args = field(default_factory=list)
    dynamic: bool = False  # an argument in option position was not static

    def has(self, *flags: str) -> bool:
        return any(f in flags for f, _ in self.opts)

    def values(self, *flags: str) -> list[str | None]:
        return [v for f, v in self.opts if f in flags]


def split(
    args: Sequence[str | None], takes_value: Iterable[str] = (), *, stop_at_operand: bool = False
) -> Parsed:
    """Split GNU-style arguments. ``takes_value`` names options with a value ("-o", "--output").

    Bundled short flags are expanded (-rf -> -r -f); a short option taking a value swallows the rest of
    the bundle or the next argument. ``stop_at_operand`` treats everything from the first operand on as
    operands (for wrappers whose operand is a command).
    """
    needs = set(takes_value)
    out = Parsed()
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg is None:
            out.dynamic = True
            out.operands.append(None)
            if stop_at_operand:
                out.operands += args[i:]
                break
            continue
        if arg == "--":
            out.operands += args[i:]
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if eq:
                out.opts.append((name, value))
            elif name in needs and i < len(args):
                out.opts.append((name, args[i]))
                i += 1
            else:
                out.opts.append((name, None))
            continue
        if arg.startswith("-") and len(arg) > 1:
            for j, letter in enumerate(arg[1:], start=1):
                flag = "-" + letter
                if flag in needs:
                    rest = arg[j + 1 :]
                    if rest:
                        out.opts.append((flag, rest))
                    elif i < len(args):
                        out.opts.append((flag, args[i]))
                        i += 1
                    else:
                        out.opts.append((flag, None))
                    break
                out.opts.append((flag, None))
            continue
        out.operands.append(arg)
        if stop_at_operand:
            out.operands += args[i:]
            break
    return out


def is_version_query(args: Sequence[str | None]) -> bool:
    return len(args) == 1 and args[0] in ("--version", "-V", "--help", "-h", "version", "help")


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DQ_ESCAPE = re.compile(r"\\([\\\"$`\n])")


def source(node: tree_sitter.Node) -> bytes:
    """The node's source text (always there: commands are parsed from bytes, not through a read callback)."""
    if node.text is None:
        raise ValueError(f"a {node.type} node without its source text")
    return node.text


def word(node: tree_sitter.Node) -> str | None:
    """The literal value of a word, or None when it depends on an expansion."""
    kind = node.type
    text = source(node).decode(errors="replace")
    if kind == "word":
        return _ESCAPE.sub(r"\1", text)
    if kind == "number":
        return text
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        parts = node.named_children
        if all(p.type == "string_content" for p in parts):
            return "".join(_DQ_ESCAPE.sub(r"\1", source(p).decode(errors="replace")) for p in parts)
        return None
    if kind == "concatenation":
        values = [word(p) for p in node.named_children]
        return None if None in values else "".join(v for v in values if v is not None)
    if kind == "process_substitution":
        return "/dev/fd/63"
    return None


def static_args(ctx: Ctx, name: str, args: Args) -> list[str]:
    """The arguments, for commands where an unknown argument could be a writing flag."""
    if any(a is None for a in args):
        ctx.risky(f"{name} with an argument not known before running (it could be a writing flag)")
    return [a for a in args if a is not None]
