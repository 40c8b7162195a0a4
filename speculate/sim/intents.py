"""Scenario tool steps as intents, rendered as calls of whatever tools the client offered.

A scripted step says what the model does (read this file, run this command, replace this text, list files
matching, search for) in the vocabulary of speculate's own tools (``Read``, ``Bash``, ...). Clients offer
different tools: Claude Code's Bash takes ``timeout``, others call their tools ``read_file`` or
``run_shell_command``, Anthropic's text editor tool takes ``command: view``. For each call the simulator:

1. uses it as scripted when the client has that tool and the input passes the tool's ``input_schema``;
2. else maps it onto the client's tool for the same intent (field names and units adapted; optional fields
   the tool lacks are dropped unless dropping them changes what the call does) and checks the schema;
3. else runs the intent as a shell command through the client's Bash-like tool;
4. else gives up with a reason (the reply becomes the marked fallback).

With no ``tools`` in the request, calls go out as scripted.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from speculate.errors import SpeculateError
from speculate.sim.schema import problem

INTENT_OF = {"Read": "read", "Write": "write", "Edit": "edit", "Glob": "glob", "Grep": "grep", "Bash": "run"}

# Tool names that serve each intent in known clients, tried in this order after the scripted name.
TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "read": ("Read", "read_file", "ReadFile", "view", "read"),
    "write": ("Write", "write_file", "WriteFile", "create_file", "write"),
    "edit": ("Edit", "edit_file", "replace", "Replace", "str_replace", "edit"),
    "glob": ("Glob", "glob", "FindFiles", "find_files", "list_files"),
    "grep": ("Grep", "grep", "search_file_content", "SearchText", "search_files", "rg"),
    "run": ("Bash", "bash", "shell", "Shell", "run_shell_command", "exec_command", "execute_command"),
}

Essential = Callable[[Any], bool]
_ALWAYS: Essential = lambda v: True  # noqa: E731
_NEVER: Essential = lambda v: False  # noqa: E731
_TRUTHY: Essential = bool

# Canonical field -> the names a client's schema may use for it, and whether dropping it changes the call.
FIELDS: dict[str, tuple[tuple[str, tuple[str, ...], Essential], ...]] = {
    "read": (
        ("file_path", ("file_path", "path", "absolute_path", "filePath", "target_file"), _ALWAYS),
        ("offset", ("offset", "start_line"), _NEVER),
        ("limit", ("limit",), _NEVER),
    ),
    "write": (
        ("file_path", ("file_path", "path", "absolute_path", "filePath", "target_file"), _ALWAYS),
        ("content", ("content", "file_text", "contents", "text"), _ALWAYS),
    ),
    "edit": (
        ("file_path", ("file_path", "path", "absolute_path", "filePath", "target_file"), _ALWAYS),
        ("old_string", ("old_string", "old_str", "old_text", "oldText"), _ALWAYS),
        ("new_string", ("new_string", "new_str", "new_text", "newText"), _ALWAYS),
        ("replace_all", ("replace_all", "replaceAll"), _TRUTHY),
    ),
    "glob": (
        ("pattern", ("pattern", "glob"), _ALWAYS),
        ("path", ("path", "dir_path", "directory", "cwd"), _ALWAYS),
    ),
    "grep": (
        ("pattern", ("pattern", "regex", "query"), _ALWAYS),
        ("path", ("path", "dir_path", "directory"), _ALWAYS),
        ("glob", ("glob", "include", "file_pattern"), _ALWAYS),
        ("output_mode", ("output_mode",), lambda v: v != "files_with_matches"),
        ("case_insensitive", ("case_insensitive", "-i", "ignore_case", "ignoreCase"), _TRUTHY),
        ("head_limit", ("head_limit", "max_results"), _NEVER),
    ),
    "run": (
        ("command", ("command", "cmd"), _ALWAYS),
        ("timeout_ms", ("timeout_ms", "timeout"), _NEVER),
        ("description", ("description",), _NEVER),
    ),
}


class RenderError(SpeculateError, ValueError):
    """No tool of the client can carry out the intent; the message says why."""


def _schemas(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Tool name -> input schema (None for a schema-less Anthropic-defined tool the adapters know)."""
    out: dict[str, dict[str, Any] | None] = {}
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str):
            continue
        kind = str(tool.get("type") or "custom")
        if kind == "custom" and isinstance(tool.get("input_schema"), dict):
            out[name] = tool["input_schema"]
        elif kind.startswith("bash_"):
            out[name] = {
                "type": "object",
                "properties": {"command": {"type": "string"}, "restart": {"type": "boolean"}},
                "required": ["command"],
            }
        elif kind.startswith("text_editor_"):
            out[name] = None
    return out


def _units(field: str, value: Any, target: str, schema: dict[str, Any]) -> Any:
    if field == "timeout_ms" and target != "timeout_ms":
        described = str((schema.get("properties") or {}).get(target, {}).get("description", "")).lower()
        if "second" in described and "millisecond" not in described:
            return max(1, round(value / 1000))
    return value


def _adapt(intent: str, inp: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any] | str:
    """``inp`` in this schema's field names, or the reason it does not fit."""
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for field, names, essential in FIELDS[intent]:
        if field not in inp:
            continue
        target = next((n for n in names if n in props), None)
        if target is None:
            if essential(inp[field]):
                return f"it has no field for {field}"
            continue
        out[target] = _units(field, inp[field], target, schema)
    bad = problem(out, schema)
    return out if bad is None else bad


def _editor(intent: str, inp: dict[str, Any]) -> dict[str, Any] | str:
    """The call for Anthropic's text editor tool (view / create / str_replace)."""
    if intent == "read":
        out: dict[str, Any] = {"command": "view", "path": inp["file_path"]}
        if "offset" in inp:
            start = inp["offset"]
            out["view_range"] = [start, start + inp["limit"] - 1 if "limit" in inp else -1]
        return out
    if intent == "write":
        return {"command": "create", "path": inp["file_path"], "file_text": inp["content"]}
    if intent == "edit" and not inp.get("replace_all"):
        return {"command": "str_replace", "path": inp["file_path"], "old_str": inp["old_string"],
                "new_str": inp["new_string"]}  # fmt: skip
    return f"the text editor tool cannot {intent}" + (" every occurrence" if intent == "edit" else "")


# Small programs for the shell forms: exact text replacement and writes survive any quoting this way.
_EDIT_PY = (
    "import pathlib,sys;p=pathlib.Path(sys.argv[1]);t=p.read_text();"
    "o,n,a=sys.argv[2],sys.argv[3],sys.argv[4]=='1';k=t.count(o);ok=k>=1 if a else k==1;"
    "sys.exit(f'{p}: old text found {k} times') if not ok else p.write_text(t.replace(o,n))"
)
_WRITE_PY = (
    "import pathlib,sys;p=pathlib.Path(sys.argv[1]);p.parent.mkdir(parents=True,exist_ok=True);"
    "p.write_text(sys.argv[2])"
)
_GLOB_PY = (
    "import pathlib,sys;"
    "[print(p) for p in sorted(pathlib.Path(sys.argv[1]).glob(sys.argv[2])) if p.is_file()]"
)


def shell_command(intent: str, inp: dict[str, Any]) -> str:
    """The intent as one shell command (for clients whose only suitable tool is a shell)."""
    q = shlex.quote
    if intent == "read":
        path = q(inp["file_path"])
        if "offset" in inp or "limit" in inp:
            start = inp.get("offset", 1)
            end = f"{start + inp['limit'] - 1}" if "limit" in inp else "$"
            return f"sed -n '{start},{end}p' {path}"
        return f"cat {path}"
    if intent == "write":
        return f"python3 -c {q(_WRITE_PY)} {path_arg(inp)} {q(inp['content'])}"
    if intent == "edit":
        flag = "1" if inp.get("replace_all") else "0"
        return (
            f"python3 -c {q(_EDIT_PY)} {path_arg(inp)} {q(inp['old_string'])} {q(inp['new_string'])} {flag}"
        )
    if intent == "glob":
        return f"python3 -c {q(_GLOB_PY)} {q(inp.get('path') or '.')} {q(inp['pattern'])}"
    if intent == "grep":
        mode = {"files_with_matches": " -l", "count": " -c", "content": " -n"}[
            inp.get("output_mode", "files_with_matches")
        ]
        flags = "-rE" + (" -i" if inp.get("case_insensitive") else "") + mode
        include = f" --include={q(inp['glob'])}" if inp.get("glob") else ""
        cmd = f"grep {flags}{include} -e {q(inp['pattern'])} {q(inp.get('path') or '.')}"
        return cmd + (f" | head -n {int(inp['head_limit'])}" if inp.get("head_limit") else "")
    raise ValueError(f"no shell form for intent {intent!r}")


def path_arg(inp: dict[str, Any]) -> str:
    return shlex.quote(inp["file_path"])


def _via_shell(
    intent: str, inp: dict[str, Any], schemas: dict[str, dict[str, Any] | None]
) -> tuple[str, dict[str, Any]] | None:
    run = {
        "command": shell_command(intent, inp),
        "description": f"{intent} (scripted intent, run as a command)",
    }
    for name in TOOL_NAMES["run"]:
        schema = schemas.get(name)
        if schema is not None:
            adapted = _adapt("run", run, schema)
            if isinstance(adapted, dict):
                return name, adapted
    return None


def render(
    name: str, inp: dict[str, Any], tools: Sequence[dict[str, Any]] | None
) -> tuple[str, dict[str, Any]]:
    """The tool call a client with ``tools`` receives for the scripted call ``name(inp)``."""
    intent = INTENT_OF.get(name)
    if tools is None or intent is None:
        return name, inp
    schemas = _schemas(tools)
    reasons: list[str] = []
    editors = (
        [n for n, schema in schemas.items() if schema is None] if intent in ("read", "write", "edit") else []
    )
    for candidate in dict.fromkeys((name, *TOOL_NAMES[intent], *editors)):
        if candidate not in schemas:
            continue
        schema = schemas[candidate]
        if schema is None:
            adapted = _editor(intent, inp) if intent != "run" else "a shell is needed"
        elif candidate == name and problem(inp, schema) is None:
            return name, inp
        else:
            adapted = _adapt(intent, inp, schema)
        if isinstance(adapted, dict):
            return candidate, adapted
        reasons.append(f"{candidate}: {adapted}")
    if intent != "run":
        shell = _via_shell(intent, inp, schemas)
        if shell is not None:
            return shell
    offered = ", ".join(schemas) or "none"
    why = f" ({'; '.join(reasons)})" if reasons else ""
    raise RenderError(
        f"the client offers no tool to {intent} {json.dumps(inp)[:120]}{why}; tools offered: {offered}"
    )
