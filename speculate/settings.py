"""Claude Code's settings files, the parts speculate reads: hooks, permission rules and modes, the MCP
approval keys, and which MCP tools a speculation may call.

Files, lowest precedence first: ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR`` when set),
``<project>/.claude/settings.json`` and ``<project>/.claude/settings.local.json``. Hooks from every file
run; permission lists (``allow``, ``deny``, ``ask``, ``additionalDirectories``) and
``disabledMcpjsonServers`` are joined; ``permissions.defaultMode`` and ``disableAllHooks`` are the last
file's that sets them (:mod:`speculate.settings_modes` says how, as Claude Code 2.1.332 does). In a
workspace not yet trusted (:mod:`speculate.trust`) the project's allow rules and additional directories are
left out, with Claude Code's note. Other keys of Claude Code's format are left alone. A malformed file is
a :class:`SettingsError` naming the file and the key; a hook event or type that speculate does not run is
a note, not an error (newer Claude Code versions add them).

speculate's own key: ``"speculation": {"readOnlyMcpTools": ["mcp__docs__search"], "env": ["CI"],
"protectedPaths": ["deploy/**"], "value": 0.01, "candidates": 2, "budget": {"tokens": 400000, "cpus": 1},
"prior": [1, 1], "pooling": 2, "persist": true, "edits": "ask"}``. ``readOnlyMcpTools`` names MCP tools the user declares read-only, which a
speculative fork may then call (every other MCP call stops it); like the other read-only tools, the main loop
runs them without asking. ``env`` names environment variables a speculation's sandboxed commands and hooks
may see besides the fixed few (:data:`overlayfs.sandbox.policy.PASSED_ENV`); every other variable stays
outside the sandbox. ``protectedPaths`` (gitignore-style patterns, relative to the project) adds paths a fork
must not write, besides the execution-config files it never writes (``.git/``, ``.claude/``, ``.mcp.json``,
``.envrc``, ``.vscode/``, ``.idea/``): a write there reaches the project only through a normal turn
(:mod:`speculate.speculation.guard`). ``value`` (λ, dollars per second saved; absent: always speculate),
``candidates`` (top-K), ``budget`` (what the K forks of a cycle share: tokens, and sandboxed commands at
once), ``prior`` (Beta a, b of P(accept)), ``pooling`` and ``persist`` (keep the estimate per project) are the
speculation policy's (:mod:`speculate.speculation.policy`); ``edits`` (``"ask"`` or ``"stop"``) is what a fork
does at an edit the live path would ask about in ``default`` mode (the REPL's ``--spec-edits``); a later
file overrides the ones it sets.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from speculate.errors import SpeculateError
from speculate.instructions import user_dir

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "PreCompact",
    "SessionEnd",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})  # the matcher names a tool
# Events whose matcher names something else: SessionStart's source (startup, clear, compact; Claude Code also
# has resume), PreCompact's trigger (manual, auto). The others have no matcher (it is ignored).
MATCHED_EVENTS = TOOL_EVENTS | {"SessionStart", "PreCompact"}
DEFAULT_TIMEOUT_S = 60.0  # Claude Code's default per hook command
# A matcher of names (Claude Code 2.1.332's test for the events above): split at | and at commas, each part
# trimmed, so "Edit | Write" and "Read " name tools; anything else is a regular expression.
NAMES_MATCHER = re.compile(r"[A-Za-z0-9_|, -]+")


class SettingsError(SpeculateError, ValueError):
    """A settings file that cannot be used; the message names the file and the key."""


class HookCommand(BaseModel):
    model_config = ConfigDict(extra="allow")  # newer Claude Code fields (statusMessage, ...) are not ours
    type: str
    command: str | None = None
    timeout: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=86_400, description="seconds")

    @model_validator(mode="after")
    def _command_needs_text(self) -> HookCommand:
        if self.type == "command" and not (self.command or "").strip():
            raise ValueError("a command hook needs a non-empty 'command'")
        return self


class HookMatcher(BaseModel):
    model_config = ConfigDict(extra="forbid")
    matcher: str = ""
    hooks: list[HookCommand]

    @field_validator("matcher")
    @classmethod
    def _regex(cls, v: str) -> str:
        if v in ("", "*") or NAMES_MATCHER.fullmatch(v):  # "every tool", or plain names
            return v
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a valid regular expression: {e}") from None
        return v


class Permissions(BaseModel):
    model_config = ConfigDict(extra="allow")
    allow: list[str] = []
    deny: list[str] = []
    ask: list[str] = []
    defaultMode: str | None = None  # an unknown value is a note, not an error: Claude Code ignores it
    additionalDirectories: list[str] = []


def _env_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"{name!r} is not an environment variable name (letters, digits and _)")
    return name


EnvName = Annotated[str, AfterValidator(_env_name)]


class SpeculationBudget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: int | None = Field(default=None, gt=0)  # all K forks of one cycle together
    cpus: int | None = Field(default=None, gt=0)  # sandboxed commands the K forks run at once


class Speculation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    readOnlyMcpTools: list[str] = []  # the JSON key: camelCase, as Claude Code's are
    env: list[EnvName] = []  # variable names passed into the sandbox
    protectedPaths: list[str] = []
    # The speculation policy (speculate.speculation.policy): a later file overrides the keys it sets.
    value: float | None = Field(default=None, ge=0)  # λ, dollars per second saved; None: always speculate
    candidates: int = Field(default=1, ge=1, le=5)  # top-K
    budget: SpeculationBudget = SpeculationBudget()
    prior: tuple[Annotated[float, Field(gt=0)], Annotated[float, Field(gt=0)]] = (1.0, 1.0)
    pooling: float = Field(default=2.0, ge=0)
    persist: bool = False
    # A fork's edit the live path would ask about: "ask" on acceptance, or "stop" before it (SessionConfig.spec_edits)
    edits: Literal["ask", "stop"] | None = None

    @field_validator("protectedPaths")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        from speculate.tools.globmatch import compile_glob

        for i, p in enumerate(v):
            if not p.strip() or p.strip() in ("/", "."):
                raise ValueError(
                    f"[{i}] {p!r}: an empty pattern (or the whole project) protects nothing usefully"
                )
            if p.startswith("!"):
                raise ValueError(f"[{i}] {p!r}: negated patterns are not supported")
            if p.startswith("..") or "/../" in p or p.endswith("/.."):
                raise ValueError(f"[{i}] {p!r}: patterns are relative to the project and stay inside it")
            compile_glob(p.strip("/"))  # ValueError names a malformed pattern
        return v

    @field_validator("readOnlyMcpTools")
    @classmethod
    def _mcp_names(cls, v: list[str]) -> list[str]:
        bad = [n for n in v if not re.fullmatch(r"mcp__[\w-]+__[\w-]+", n)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an MCP tool name (mcp__<server>__<tool>)")
        return v


class SettingsFile(BaseModel):
    model_config = ConfigDict(extra="allow")  # the rest of Claude Code's settings are not ours
    hooks: dict[str, list[HookMatcher]] = {}
    permissions: Permissions = Permissions()
    speculation: Speculation = Speculation()
    claudeMdExcludes: list[str] = []  # instructions files not to load (speculate.instruction_rules)
    disableAllHooks: StrictBool | None = None
    # Claude Code's approval of the servers of a project's .mcp.json. With -p (and in speculate) a server in
    # none of them is started; a disabled one is neither started nor offered, whatever enables it.
    enableAllProjectMcpServers: StrictBool | None = None
    enabledMcpjsonServers: list[str] = []
    disabledMcpjsonServers: list[str] = []


@dataclass(frozen=True)
class Hook:
    """One command to run for one event."""

    event: str
    matcher: str
    command: str
    timeout: float
    source: Path

    def matches(self, target: str | None) -> bool:
        """Claude Code's matcher rule: empty or ``*`` matches everything; names (``A|B``, ``A, B``, each
        trimmed: ``"Edit | Write"`` fires on Write) match exactly; anything else is a regular expression searched in the name. ``target`` is the tool name
        (tool events), the source (SessionStart) or the trigger (PreCompact); other events ignore it."""
        if self.event not in MATCHED_EVENTS or self.matcher in ("", "*"):
            return True
        if target is None:
            return False
        if NAMES_MATCHER.fullmatch(self.matcher):
            return target in {part.strip() for part in re.split(r"[|,]", self.matcher)} - {""}
        return re.search(self.matcher, target) is not None


@dataclass(frozen=True)
class Settings:
    hooks: tuple[Hook, ...] = ()
    allow: tuple[str, ...] = ()  # RuleText: each rule knows its settings file
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    read_only_mcp: frozenset[str] = frozenset()
    env: tuple[str, ...] = ()  # speculation.env: passed into the sandbox
    protected_paths: tuple[str, ...] = ()
    policy: Speculation = field(
        default_factory=Speculation
    )  # its policy keys (value, candidates, ...), merged
    files: tuple[Path, ...] = ()
    notes: tuple[str, ...] = field(default=())
    default_mode: str | None = None  # permissions.defaultMode, resolved (speculate.settings_modes)
    additional_dirs: tuple[str, ...] = ()  # absolute
    hooks_off: Path | None = None  # the file whose disableAllHooks: true turned every hook off
    mcp_enabled: frozenset[str] = frozenset()  # enabledMcpjsonServers (and enableAllProjectMcpServers)
    mcp_enable_all: bool = False
    mcp_disabled: frozenset[str] = frozenset()  # disabledMcpjsonServers: never started
    untrusted_ignored: int = 0  # entries left out because the workspace is not trusted


def settings_paths(project: Path, *, user: Path | None = None) -> list[Path]:
    base = user or user_dir()
    return [
        base / "settings.json",
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
    ]


def claude_md_excludes(project: Path, *, user: Path | None = None) -> tuple[str, ...]:
    """``claudeMdExcludes`` of every settings file, joined as Claude Code joins them: patterns of the
    instructions files not to load. A missing or malformed file adds nothing (:func:`load_settings` says
    what is wrong with it)."""
    out: list[str] = []
    for path in settings_paths(project, user=user):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        value = raw.get("claudeMdExcludes") if isinstance(raw, dict) else None
        out += [p for p in value if isinstance(p, str) and p not in out] if isinstance(value, list) else []
    return tuple(out)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_settings_file(path: Path, text: str) -> tuple[SettingsFile, list[str]]:
    """Validate one file's text; SettingsError names the file and the key of each problem."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise SettingsError(f"{path}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(raw, dict):
        raise SettingsError(f"{path}: the top level must be a JSON object, not {type(raw).__name__}")
    try:
        parsed = SettingsFile.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{_loc(err['loc'])}: {err['msg']}" for err in e.errors())
        raise SettingsError(f"{path}: {problems}") from None
    notes = []
    for event, matchers in parsed.hooks.items():
        if event not in EVENTS:
            notes.append(f"{path}: hooks.{event}: speculate runs only {', '.join(EVENTS)} hooks; ignored")
            continue
        for i, m in enumerate(matchers):
            for j, h in enumerate(m.hooks):
                if h.type != "command":
                    notes.append(
                        f"{path}: hooks.{event}[{i}].hooks[{j}]: type {h.type!r} is not run here "
                        "(only 'command' hooks are); ignored"
                    )
    return parsed, notes


def load_settings(project: Path, *, user: Path | None = None, trusted: bool = True) -> Settings:
    """Every settings file that exists, merged. ``trusted=False``: a workspace the user has not trusted
    (:mod:`speculate.trust`), whose allow rules and additional directories are left out with a note."""
    from speculate.settings_modes import TrustGate, resolve_default_mode

    hooks: list[Hook] = []
    allow: list[str] = []
    deny: list[str] = []
    ask: list[str] = []
    dirs: list[str] = []
    read_only: set[str] = set()
    env: dict[str, None] = {}
    protected: list[str] = []
    policy = Speculation()
    files, notes = [], []
    modes: list[tuple[str, Path]] = []
    hooks_off: Path | None = None
    mcp_enabled: set[str] = set()
    mcp_disabled: set[str] = set()
    mcp_enable_all = False
    gate = TrustGate(project, trusted=trusted)
    user_file, *project_files = settings_paths(project, user=user)
    for path in (user_file, *project_files):
        # "/path" in a rule is relative to the file's root: the project for the project's files, the user's
        # directory (~/.claude) for the user's file (what Claude Code 2.1.332 does; docs/claude-code.md).
        base = user_file.parent.absolute() if path == user_file else project.absolute()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as e:
            raise SettingsError(f"{path}: cannot be read: {e.strerror}") from None
        parsed, file_notes = parse_settings_file(path, text)
        files.append(path)
        notes += file_notes
        for event, matchers in parsed.hooks.items():
            if event in EVENTS:
                hooks += [
                    Hook(event, m.matcher, h.command or "", h.timeout, path)
                    for m in matchers
                    for h in m.hooks
                    if h.type == "command"
                ]
        perms = parsed.permissions
        allowed = gate.keep(path, "permissions.allow", perms.allow, user=path == user_file)
        allow += _rules(path, "allow", allowed, notes, base=base)
        deny += _rules(path, "deny", perms.deny, notes, base=base)
        ask += _rules(path, "ask", perms.ask, notes, base=base)
        added = [os.path.abspath(project / os.path.expanduser(d)) for d in perms.additionalDirectories]
        dirs += gate.keep(path, "permissions.additionalDirectories", added, user=path == user_file)
        if perms.defaultMode is not None:
            modes.append((perms.defaultMode, path))
        if parsed.disableAllHooks is not None:  # the last file that says wins: false turns them back on
            hooks_off = path if parsed.disableAllHooks else None
        if parsed.enableAllProjectMcpServers is not None:
            mcp_enable_all = parsed.enableAllProjectMcpServers
        mcp_enabled.update(parsed.enabledMcpjsonServers)
        mcp_disabled.update(parsed.disabledMcpjsonServers)
        read_only.update(parsed.speculation.readOnlyMcpTools)
        env.update(dict.fromkeys(parsed.speculation.env))
        protected += [p for p in parsed.speculation.protectedPaths if p not in protected]
        policy = policy.model_copy(
            update={
                k: getattr(parsed.speculation, k) for k in POLICY_KEYS & parsed.speculation.model_fields_set
            }
        )
    if hooks_off is not None and hooks:
        notes.append(f"{hooks_off}: disableAllHooks is true: none of the settings' {len(hooks)} hooks run")
        hooks = []
    notes += gate.notes()
    default_mode = resolve_default_mode(modes, user_file=user_file, notes=notes)
    return Settings(
        hooks=tuple(hooks),
        allow=tuple(allow),
        deny=tuple(deny),
        ask=tuple(ask),
        read_only_mcp=frozenset(read_only),
        env=tuple(env),
        protected_paths=tuple(protected),
        policy=policy,
        files=tuple(files),
        notes=tuple(notes),
        default_mode=default_mode,
        additional_dirs=tuple(dict.fromkeys(dirs)),
        hooks_off=hooks_off,
        mcp_enabled=frozenset(mcp_enabled),
        mcp_enable_all=mcp_enable_all,
        mcp_disabled=frozenset(mcp_disabled),
        untrusted_ignored=gate.dropped,
    )


POLICY_KEYS = frozenset({"value", "candidates", "budget", "prior", "pooling", "persist", "edits"})


def _rules(path: Path, key: str, rules: list[str], notes: list[str], *, base: Path) -> list[str]:
    """The rules speculate can apply, each knowing its file (:class:`RuleText`); a rule for a tool it does
    not have (WebFetch, Task) is a note."""
    from speculate.permission_rules import KNOWN_TOOLS, PermissionRuleError, Rule, RuleText

    out: list[str] = []
    for i, text in enumerate(rules):
        name = re.match(r"\s*([\w-]*)", text).group(1)  # type: ignore[union-attr]  # matches any string
        try:
            Rule.parse(text, known_tools={name} if name else ())
        except PermissionRuleError as e:
            raise SettingsError(f"{path}: permissions.{key}[{i}]: {e}") from None
        if name in KNOWN_TOOLS or name.startswith("mcp__"):
            out.append(RuleText(text, source=path, base=base))
        else:
            notes.append(f"{path}: permissions.{key}[{i}]: speculate has no tool {name!r}; rule ignored")
    return out
