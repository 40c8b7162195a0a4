"""Glob patterns over project-relative POSIX paths, shared by Glob, Grep's fallback and permission rules.

Syntax: ``*`` and ``?`` (not across ``/``), ``**`` as a whole segment (any number of directories),
``[abc]`` / ``[!abc]``, ``{a,b}`` alternatives (nestable), ``\\`` escapes. Two ways to apply a pattern:
:func:`match_path` anchors it at the root (Glob), :func:`match_ignore_style` follows ripgrep's ``--glob``
and gitignore: a pattern without ``/`` matches the base name at any depth, one with ``/`` is anchored.
"""

from __future__ import annotations

import functools
import re

_META = set("*?[{\\")


def has_magic(segment: str) -> bool:
    return any(c in _META for c in segment)


def _find_close(pat: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``i`` (nesting counted), or -1."""
    depth = 0
    j = i
    while j < len(pat):
        c = pat[j]
        if c == "\\":
            j += 2
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def _split_top(body: str) -> list[str]:
    """Split brace contents on commas that are not nested in inner braces."""
    parts, depth, start, j = [], 0, 0, 0
    while j < len(body):
        c = body[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:j])
            start = j + 1
        j += 1
    parts.append(body[start:])
    return parts


def translate(pat: str) -> str:
    """The regex source (unanchored) for a glob pattern."""
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if c == "*":
            if pat.startswith("**", i) and (i == 0 or pat[i - 1] == "/"):
                if pat.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                if i + 2 == n:
                    out.append(".*")
                    i += 2
                    continue
            while i < n and pat[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pat.find("]", i + 2 if pat.startswith(("[!", "[^", "[]"), i) else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pat[i + 1 : j]
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                out.append("[" + ("^/" if neg else "") + body.replace("\\", "\\\\") + "]")
                i = j + 1
                continue
        elif c == "{":
            j = _find_close(pat, i, "{", "}")
            if j < 0:
                out.append(re.escape(c))
            else:
                out.append("(?:" + "|".join(translate(p) for p in _split_top(pat[i + 1 : j])) + ")")
                i = j + 1
                continue
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pat[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """A compiled, fully anchored regex for ``pattern``; raises ValueError naming a malformed pattern."""
    try:
        return re.compile(r"(?s:" + translate(pattern) + r")\Z")
    except re.error as e:
        raise ValueError(f"invalid glob pattern {pattern!r}: {e}") from None


def match_path(pattern: str, rel: str) -> bool:
    """Does the whole project-relative path ``rel`` match ``pattern`` (anchored at the root)?"""
    return compile_glob(pattern).match(rel) is not None


def match_ignore_style(pattern: str, rel: str) -> bool:
    """ripgrep ``--glob`` / gitignore matching: no ``/`` → base name anywhere; else anchored at the root."""
    pat = pattern[1:] if pattern.startswith("/") else pattern
    if "/" not in pattern:
        return match_path(pat, rel.rsplit("/", 1)[-1])
    return match_path(pat, rel)


def literal_prefix(pattern: str) -> tuple[str, str]:
    """Split off the leading directories without glob syntax: ``src/a/**/*.py`` → (``src/a``, ``**/*.py``).

    Lets a walk start below the root instead of filtering the whole tree.
    """
    segs = pattern.split("/")
    k = 0
    while k < len(segs) - 1 and segs[k] and not has_magic(segs[k]):
        k += 1
    return "/".join(segs[:k]), "/".join(segs[k:])
