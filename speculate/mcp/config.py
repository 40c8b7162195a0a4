"""``.mcp.json`` in Claude Code's format: ``{"mcpServers": {NAME: SERVER}}``, where SERVER is
``{"type": "stdio", "command": ..., "args": [...], "env": {...}}`` (``type`` may be left out) or
``{"type": "http", "url": ..., "headers": {...}}`` (streamable HTTP). ``${VAR}`` and ``${VAR:-default}`` in
those strings are expanded from the environment.

Files are read from the git root down to the working directory; a later file's server replaces an earlier
one of the same name. A malformed file is an :class:`McpConfigError` naming the file and the key.

Claude Code's approval keys (settings ``enableAllProjectMcpServers``, ``enabledMcpjsonServers``,
``disabledMcpjsonServers``; the last also in the global config's entry for the project): as ``claude -p``
2.1.332 does, a server none of them names is started, and a disabled one is neither started nor offered,
even where another key enables it (:func:`disabled_servers`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from speculate.errors import SpeculateError
from speculate.instructions import git_root

NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpConfigError(SpeculateError, ValueError):
    """A ``.mcp.json`` that cannot be used; the message names the file and the key."""


class StdioServer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}


class HttpServer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["http"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = {}


Server = Annotated[StdioServer | HttpServer, Field(discriminator="type")]


class McpFile(BaseModel):
    model_config = ConfigDict(extra="allow")
    mcpServers: dict[str, Server] = {}  # the JSON key, camelCase as in Claude Code


@dataclass(frozen=True)
class McpConfig:
    servers: dict[str, StdioServer | HttpServer] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)  # server name -> the file that defined it
    disabled: tuple[str, ...] = ()  # servers a file defines that disabledMcpjsonServers leaves out


def _loc(loc: tuple[object, ...]) -> str:
    return ".".join(str(p) for p in loc if p not in ("stdio", "http")) or "(top level)"


def _expand(value: str, where: str, path: Path) -> str:
    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise McpConfigError(f"{path}: {where}: environment variable {name} is not set (and has no default)")

    return _VAR_RE.sub(sub, value)


def parse_mcp_file(path: Path, text: str) -> dict[str, StdioServer | HttpServer]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise McpConfigError(f"{path}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if isinstance(raw, dict):  # a server without "type" is a stdio server, as Claude Code reads it
        for spec in (raw.get("mcpServers") or {}).values() if isinstance(raw.get("mcpServers"), dict) else []:
            if isinstance(spec, dict) and "type" not in spec and "command" in spec:
                spec["type"] = "stdio"
    try:
        parsed = McpFile.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{_loc(err['loc'])}: {err['msg']}" for err in e.errors())
        raise McpConfigError(f"{path}: {problems}") from None
    out: dict[str, StdioServer | HttpServer] = {}
    for name, srv in parsed.mcpServers.items():
        key = f"mcpServers.{name}"
        if not NAME_RE.match(name):
            raise McpConfigError(f"{path}: {key}: a server name may hold only letters, digits, '_' and '-'")
        if isinstance(srv, StdioServer):
            out[name] = StdioServer(
                command=_expand(srv.command, f"{key}.command", path),
                args=[_expand(a, f"{key}.args[{i}]", path) for i, a in enumerate(srv.args)],
                env={k: _expand(v, f"{key}.env.{k}", path) for k, v in srv.env.items()},
            )
        else:
            out[name] = HttpServer(
                type="http",
                url=_expand(srv.url, f"{key}.url", path),
                headers={k: _expand(v, f"{key}.headers.{k}", path) for k, v in srv.headers.items()},
            )
    return out


def disabled_servers(project: Path, settings_disabled: Iterable[str] = ()) -> frozenset[str]:
    """The servers not to start: the settings' ``disabledMcpjsonServers`` and the global config's list for
    the project (where Claude Code's dialog records a server the user turned down)."""
    from speculate.trust import project_entry

    stored = project_entry(project).get("disabledMcpjsonServers")
    names = [n for n in stored if isinstance(n, str)] if isinstance(stored, list) else []
    return frozenset([*settings_disabled, *names])


def load_mcp_config(cwd: Path, *, disabled: Iterable[str] = ()) -> McpConfig:
    """The servers of every ``.mcp.json`` from the git root down to ``cwd``, but the ``disabled`` ones."""
    cwd = cwd.resolve()
    top = git_root(cwd) or cwd
    chain = [cwd, *cwd.parents]
    servers: dict[str, StdioServer | HttpServer] = {}
    sources: dict[str, Path] = {}
    for d in reversed(chain[: chain.index(top) + 1]):
        path = d / ".mcp.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as e:
            raise McpConfigError(f"{path}: cannot be read: {e.strerror}") from None
        for name, srv in parse_mcp_file(path, text).items():
            servers[name], sources[name] = srv, path
    off = set(disabled)
    return McpConfig(
        {n: s for n, s in servers.items() if n not in off},
        {n: p for n, p in sources.items() if n not in off},
        tuple(n for n in servers if n in off),
    )
