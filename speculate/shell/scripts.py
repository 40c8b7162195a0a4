"""Scanners for the little languages inside sed and awk arguments: do they write files or run commands?"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class ScriptEffects:
    writes: list[str] = field(default_factory=list)
    executes: bool = False
    understood: bool = True


_SIMPLE_SED = set("=dDgGhHlnNpPqQxzF")


def scan_sed(script: str) -> ScriptEffects:
    """Find `w`/`W` files, `e` commands and the `e`/`w` flags of `s` in a (GNU) sed script."""
    out = ScriptEffects()
    s, n, i = script, len(script), 0

    def until_unescaped(pos: int, delim: str) -> int:
        while pos < n and s[pos] != delim:
            if s[pos] == "\\":
                pos += 1
            elif s[pos] == "\n" and delim != "\n":
                return -1
            pos += 1
        return pos if pos < n else -1

    def rest_of_line(pos: int) -> tuple[str, int]:
        end = s.find("\n", pos)
        end = n if end < 0 else end
        return s[pos:end].strip(), end

    def address(pos: int) -> int:
        if pos < n and s[pos] == "/":
            end = until_unescaped(pos + 1, "/")
            return -1 if end < 0 else _address_flags(end + 1)
        if pos + 1 < n and s[pos] == "\\":
            end = until_unescaped(pos + 2, s[pos + 1])
            return -1 if end < 0 else _address_flags(end + 1)
        m = re.compile(r"[0-9]+(~[0-9]+)?|\$").match(s, pos)
        return m.end() if m else pos

    def _address_flags(pos: int) -> int:
        while pos < n and s[pos] in "IM":
            pos += 1
        return pos

    while i < n:
        while i < n and s[i] in " \t\n;}":
            i += 1
        if i >= n:
            break
        if s[i] == "#":
            i = rest_of_line(i)[1]
            continue
        i = address(i)
        if i >= 0 and i < n and s[i] == ",":
            i += 1
            m = re.compile(r"[+~][0-9]+").match(s, i)
            i = m.end() if m else address(i)
        if i < 0:
            return ScriptEffects(understood=False)
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            return ScriptEffects(understood=False)
        cmd = s[i]
        i += 1
        if cmd == "{":
            continue
        if cmd in "aic":
            i = rest_of_line(i)[1]
            while i < n and s[i - 1] == "\\":  # continued text lines
                i = rest_of_line(i + 1)[1]
        elif cmd in "sy":
            if i >= n or s[i] in "\n\\":
                return ScriptEffects(understood=False)
            delim = s[i]
            end = until_unescaped(i + 1, delim)
            end = -1 if end < 0 else until_unescaped(end + 1, delim)
            if end < 0:
                return ScriptEffects(understood=False)
            i = end + 1
            if cmd == "s":
                m = re.compile(r"[gpiImMe0-9]*").match(s, i)
                assert m is not None
                flags, i = m.group(), m.end()
                out.executes |= "e" in flags
                if i < n and s[i] == "w":
                    target, i = rest_of_line(i + 1)
                    out.writes.append(target)
        elif cmd in "wW":
            target, i = rest_of_line(i)
            out.writes.append(target)
        elif cmd in "rR":
            i = rest_of_line(i)[1]
        elif cmd == "e":
            out.executes = True
            i = rest_of_line(i)[1]
        elif cmd in "btT:":
            m = re.compile(r"[^;\n]*").match(s, i)
            assert m is not None
            i = m.end()
        elif cmd in "qQlL":
            m = re.compile(r"\s*[0-9]*").match(s, i)
            assert m is not None
            i = m.end()
        elif cmd not in _SIMPLE_SED:
            return ScriptEffects(understood=False)
    return out


_AWK_SYSTEM = re.compile(r"\bsystem\s*\(|@load|\bextension\s*\(")
_AWK_PIPE = re.compile(r"(?<!\|)\|(?!\|)")
_AWK_REDIRECT = re.compile(r"\bprintf?\b[^;{}\n]*>")


def scan_awk(program: str) -> ScriptEffects:
    """Conservative: any pipe, system() or print redirection counts (comparisons inside print too)."""
    out = ScriptEffects()
    if _AWK_SYSTEM.search(program) or _AWK_PIPE.search(program):
        out.executes = True
    if _AWK_REDIRECT.search(program):
        out.understood = False  # writes a file whose name we do not extract
    return out
