"""Tool inputs checked against the tool's JSON Schema, with the ``jsonschema`` library.

The client's ``input_schema`` says which draft it is written in (``$schema``; Draft 2020-12 when absent, as
the Messages API assumes); every keyword of that draft is checked, ``$ref`` and ``$defs`` included. The
first problem is reported as ``path: reason`` (``input.a[0]: ...``), the one ``jsonschema`` ranks most
relevant, so that a scripted call that does not fit a client's tool says which field is wrong.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import referencing.exceptions
from jsonschema.exceptions import best_match


def problem(value: Any, schema: Any, path: str = "input") -> str | None:
    """The first way ``value`` breaks ``schema``, as ``path: reason``; None when it conforms."""
    if not isinstance(schema, dict):
        return None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
        err = best_match(cls(schema).iter_errors(value))
    except jsonschema.SchemaError as e:
        return f"{path}: the tool's input_schema is not a valid schema ({e.message})"
    except referencing.exceptions.Unresolvable as e:
        return f"{path}: the tool's input_schema has a $ref that does not resolve ({e})"
    if err is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
    return f"{path}{where}: {err.message}"
