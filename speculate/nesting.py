"""Nesting bounds for structured input from outside: a scenario's YAML, a request's JSON.

Parsers and the code that walks what they return recurse once per level, so a few kilobytes of ``[[[[``
end in a RecursionError (a traceback, or a dead handler thread). These checks walk without recursion and
raise :class:`TooDeep`, a ValueError whose message names the input, its depth and the bound, before any
recursive code sees the input. (Shell commands have their own bound: :data:`speculate.shell.classify.MAX_DEPTH`.)
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from speculate.errors import SpeculateError

MAX_YAML_DEPTH = 64  # a scenario is a few levels deep (turns > steps > tools > input)
MAX_JSON_DEPTH = 128  # a Messages request: messages > content > blocks > tool input, with room for the input


class TooDeep(SpeculateError, ValueError):
    """Input nested deeper than its bound; the message names it (and the line, for YAML)."""


def yaml_too_deep(text: str, *, limit: int = MAX_YAML_DEPTH) -> int | None:
    """The line where the YAML ``text`` nests collections deeper than ``limit``, or None. Syntax errors are
    left to the parser, which reports them with their line."""
    depth = 0
    opening = (
        yaml.BlockMappingStartToken,
        yaml.BlockSequenceStartToken,
        yaml.FlowMappingStartToken,
        yaml.FlowSequenceStartToken,
    )
    closing = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, opening):
                depth += 1
                if depth > limit:
                    return int(token.start_mark.line) + 1
            elif isinstance(token, closing):
                depth -= 1
    except yaml.YAMLError:
        return None
    return None


def loads_json(raw: bytes | str, *, what: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that raises TooDeep (naming ``what``) for input nested deeper than ``limit``, instead of
    a RecursionError or a value that breaks recursive code later. JSONDecodeError is raised as json's."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise TooDeep(f"{what}: nested too deeply to parse (the bound is {limit} levels)") from None
    check_json(value, what=what, limit=limit)
    return value


def check_json(value: Any, *, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if d > limit:
            raise TooDeep(f"{what}: nested more than {limit} levels deep")
        stack.extend((c, d + 1) for c in children)
