"""A small JSON Schema checker for tool inputs: the subset tool definitions use in practice.

Covers ``type`` (one or a list), ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``
(true, false or a schema), ``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``,
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``, ``anyOf``/``oneOf``/``allOf``. Unknown
keywords (``$ref``, formats, ``default``...) are ignored, which can only make it more permissive.
"""

from __future__ import annotations

import re
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False  # JSON booleans are not numbers (Python's bool is an int)
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def problem(value: Any, schema: Any, path: str = "input") -> str | None:
    """The first way ``value`` breaks ``schema``, as ``path: reason``; None when it conforms."""
    if not isinstance(schema, dict):
        return None
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, k) for k in kinds):
            return f"{path}: expected {' or '.join(kinds)}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: {value!r} is not one of {schema['enum']}"
    if "const" in schema and value != schema["const"]:
        return f"{path}: must be {schema['const']!r}"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and all(problem(value, o, path) for o in options):
            return problem(value, options[0], path)
    for sub in schema.get("allOf") or []:
        if (bad := problem(value, sub, path)) is not None:
            return bad
    if isinstance(value, dict):
        return _object(value, schema, path)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{path}: fewer than {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path}: more than {schema['maxItems']} items"
        for i, item in enumerate(value):
            if (bad := problem(item, schema.get("items"), f"{path}[{i}]")) is not None:
                return bad
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{path}: shorter than {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path}: longer than {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{path}: does not match {schema['pattern']!r}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        for key, ok in (
            ("minimum", lambda b: value >= b),
            ("maximum", lambda b: value <= b),
            ("exclusiveMinimum", lambda b: value > b),
            ("exclusiveMaximum", lambda b: value < b),
        ):
            bound = schema.get(key)
            if isinstance(bound, int | float) and not ok(bound):
                return f"{path}: {value} breaks {key} {bound}"
    return None


def _object(value: dict[str, Any], schema: dict[str, Any], path: str) -> str | None:
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            return f"{path}.{name}: required"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in props:
            bad = problem(item, props[name], f"{path}.{name}")
        elif extra is False:
            bad = f"{path}.{name}: not a property of this tool"
        else:
            bad = problem(item, extra, f"{path}.{name}") if isinstance(extra, dict) else None
        if bad is not None:
            return bad
    return None
