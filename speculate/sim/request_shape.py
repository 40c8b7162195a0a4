"""The shape of a request body, checked by pydantic against the SDK's own request types.

The SDK describes a request as TypedDicts (``MessageCreateParamsBase``, ``MessageCountTokensParams``). As
they stand they check little when pydantic validates them: their lists are ``Iterable[...]``, which pydantic
validates lazily (a wrong message or block would pass unseen). :func:`strict` rebuilds each type with the
same fields, required keys and literals, and lists where the SDK says ``Iterable``; the adapter over that is
the shape check. What the types cannot say (which role may carry which block, tool_use/tool_result pairing,
ranges, each model's rules) stays in :mod:`speculate.sim.validate`.

pydantic reports a union's failure once per member (``messages.0.UserMessageParam.content.list[...].0
.TextBlockParam.text``); :func:`shape_problem` keeps the member the value's own tag (``type``, ``role``)
names and reports one problem in the API's form: ``messages.0.content.0.text: Field required``.
"""

from __future__ import annotations

import collections.abc
import functools
import os
import types
import typing
from typing import Annotated, Any, NotRequired, Required, Union, get_args, get_origin

import typing_extensions
from anthropic.types import message_count_tokens_params, message_create_params
from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from typing_extensions import TypedDict, is_typeddict

TAGS = ("type", "role")  # the fields a union member is told apart by
# pydantic error types meaning "this member is not the value's kind": a member of a union the value is not.
_KIND_ERRORS = {
    "string_type", "list_type", "dict_type", "int_type", "float_type", "bool_type", "model_type",
    "model_attributes_type", "typed_dict_type", "is_instance_of", "iterable_type", "none_required",
}  # fmt: skip


def strict(tp: Any, _seen: dict[Any, Any] | None = None) -> Any:
    """``tp`` with every SDK ``Iterable``/``Sequence`` a ``list`` and every TypedDict rebuilt so; file
    inputs (``IO``, ``PathLike``, which a JSON body never holds) become ``Any``."""
    seen = {} if _seen is None else _seen
    if tp in seen:
        return seen[tp]
    origin = get_origin(tp)
    if tp is typing.IO or origin is typing.IO or tp is os.PathLike or origin is os.PathLike:
        return Any
    if is_typeddict(tp):
        hints = typing_extensions.get_type_hints(tp, include_extras=True)
        make: Any = TypedDict  # the functional form, with fields known only at run time
        new = make(tp.__name__, {k: strict(v, seen) for k, v in hints.items()}, total=tp.__total__)
        new.__required_keys__, new.__optional_keys__ = tp.__required_keys__, tp.__optional_keys__
        seen[tp] = new
        return new
    args = get_args(tp)
    if origin in (Required, NotRequired):
        return origin[strict(args[0], seen)]
    if origin is Annotated:
        return Annotated[(strict(args[0], seen), *args[1:])]
    if origin in (collections.abc.Iterable, collections.abc.Sequence, list):
        return types.GenericAlias(list, (strict(args[0], seen),)) if args else list
    if origin in (Union, types.UnionType):
        return Union[tuple(strict(a, seen) for a in args)]  # noqa: UP007 - built from a tuple at run time
    if origin in (dict, collections.abc.Mapping) and args:
        return types.GenericAlias(dict, (args[0], strict(args[1], seen)))
    return tp


@functools.cache
def adapter(count_only: bool) -> TypeAdapter[Any]:
    """The shape of a /v1/messages body (or a count_tokens one), built once (about half a second)."""
    base = (
        message_count_tokens_params.MessageCountTokensParams
        if count_only
        else message_create_params.MessageCreateParamsBase
    )
    return TypeAdapter(strict(base))


def _walk(body: Any, loc: tuple[int | str, ...]) -> tuple[tuple[int | str, ...], list[int]]:
    """Split pydantic's ``loc`` into the path through ``body`` and the positions of union member labels."""
    path: list[int | str] = []
    labels: list[int] = []
    here = body
    for i, seg in enumerate(loc):
        if isinstance(here, dict) and isinstance(seg, str) and seg in here:
            here = here[seg]
            path.append(seg)
        elif isinstance(here, list) and isinstance(seg, int) and 0 <= seg < len(here):
            here = here[seg]
            path.append(seg)
        elif i == len(loc) - 1 and isinstance(here, dict):
            path.append(seg)  # a field the value lacks: "Field required"
        else:
            labels.append(i)
    return tuple(path), labels


def _at(body: Any, path: tuple[int | str, ...]) -> Any:
    for seg in path:
        body = body[seg]
    return body


def shape_problem(body: dict[str, Any], *, count_only: bool = False) -> str | None:
    """The one problem the API would name first in ``body``'s shape, as ``path: message``; None if none."""
    try:
        adapter(count_only).validate_python(body)
    except ValidationError as e:
        return _choose(body, e.errors(include_url=False))
    return None


def _choose(body: Any, errors: list[ErrorDetails]) -> str:
    # A union member is ruled out where its tag does not match the value's, or where the value is not of
    # its kind at all (a string where the member is a list); the errors inside a ruled-out member are noise.
    ruled_out: set[tuple[int | str, ...]] = set()
    for err in errors:
        loc = tuple(err["loc"])
        _, labels = _walk(body, loc)
        if not labels:
            continue
        member = loc[: labels[-1] + 1]
        wrong_tag = err["type"] == "literal_error" and loc[-1] in TAGS and len(loc) == labels[-1] + 2
        wrong_kind = err["type"] in _KIND_ERRORS and len(loc) == labels[-1] + 1
        if wrong_tag or wrong_kind:
            ruled_out.add(member)
    kept = [err for err in errors if not any(tuple(err["loc"])[: len(m)] == m for m in ruled_out)]
    if kept:
        # The fewest unions crossed; then a wrong tag before the fields it would have required.
        err = min(
            kept,
            key=lambda x: (
                len(_walk(body, tuple(x["loc"]))[1]),
                not (x["type"] == "literal_error" and x["loc"][-1] in TAGS),
            ),
        )
        path, _ = _walk(body, tuple(err["loc"]))
        return f"{_dotted(path)}: {err['msg']}"
    # Every member was ruled out by its tag: the value's tag is none of theirs.
    tags = [err for err in errors if err["type"] == "literal_error" and err["loc"][-1] in TAGS]
    if tags:
        path, _ = _walk(body, tuple(tags[0]["loc"]))
        value = _at(body, path) if path else None
        expected = sorted(
            {
                str(e.get("ctx", {}).get("expected", ""))
                for e in tags
                if _walk(body, tuple(e["loc"]))[0] == path
            }
        )
        return f"{_dotted(path)}: Input tag {value!r} does not match any of the expected tags: {', '.join(expected)}"
    path, _ = _walk(body, tuple(errors[0]["loc"]))
    return f"{_dotted(path)}: {errors[0]['msg']}"


def _dotted(path: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in path) or "body"
