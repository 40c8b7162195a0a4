"""The permission settings besides the rules, as Claude Code 2.1.332 reads them: ``permissions.defaultMode``
(which file's wins, and which values it ignores), workspace trust's effect on the project's entries, and
the rule lists ``--allowedTools`` / ``--disallowedTools`` take on the command line.

Observed with ``claude -p`` (docs/claude-code.md, "Settings and modes"):

- ``defaultMode``: the command line's ``--permission-mode`` first, then the local, project and user files'
  (the last file that sets a valid value). ``manual`` is another name for ``default``; a value that is not
  a mode is ignored (a lower file's counts); ``bypassPermissions`` is taken only from the user's file: from
  a project's file the mode is ``default``. Claude Code's ``auto`` mode (a classifier decides) is not
  speculate's: ignored with a note.
- Trust: until the workspace is trusted, ``permissions.allow`` and ``permissions.additionalDirectories`` of
  ``.claude/settings.json`` are left out, and those of ``.claude/settings.local.json`` when git tracks that
  file; one note per key names the files (:func:`speculate.trust.ignoring_note`).
- ``--allowedTools "Bash(git log:*) Edit"`` and ``"Bash(git log:*),Edit"`` are two rules: the list is split
  at commas and blanks outside parentheses; the option may be given several times.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, get_args

from speculate.errors import SpeculateError

# The permission modes as a type: defined here, with the settings that name them, so that the session's
# types (a layer above) import it from here and nothing here points back up at them.
PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"]
MODES: tuple[str, ...] = get_args(PermissionMode)
ALIASES = {"manual": "default"}  # Claude Code 2.1.332's --permission-mode choices name default "manual"
LOCAL_FILE = ".claude/settings.local.json"


def mode_name(value: str) -> str | None:
    """A mode's canonical name (``manual`` is ``default``), or None if speculate has no such mode."""
    value = ALIASES.get(value, value)
    return value if value in MODES else None


def resolve_default_mode(votes: list[tuple[str, Path]], *, user_file: Path, notes: list[str]) -> str | None:
    """The settings' starting mode from each file's ``permissions.defaultMode`` (lowest precedence first),
    or None where no file sets one that counts."""
    winner: tuple[str, Path] | None = None
    for value, path in votes:
        mode = mode_name(value)
        if mode is None:
            why = (
                "Claude Code's auto mode (a classifier decides each call) is not speculate's"
                if value == "auto"
                else f"not a permission mode (one of {', '.join(MODES)})"
            )
            notes.append(f"{path}: permissions.defaultMode {value!r}: {why}; ignored")
            continue
        winner = (mode, path)
    if winner is None:
        return None
    mode, path = winner
    if mode == "bypassPermissions" and path != user_file:
        notes.append(
            f"{path}: permissions.defaultMode bypassPermissions counts only in your user settings (or with "
            "--permission-mode), as in Claude Code; the mode is default"
        )
        return "default"
    return mode


def starting_mode(cli: str | None, settings_mode: str | None, fallback: PermissionMode) -> PermissionMode:
    """The session's first mode: the command line's, else the settings', else ``fallback``."""
    from typing import cast

    chosen = mode_name(cli) if cli else None
    return cast("PermissionMode", chosen or settings_mode or fallback)


class TrustGate:
    """Which of a file's allow rules and additional directories count in a workspace of this trust."""

    def __init__(self, project: Path, *, trusted: bool) -> None:
        self.project, self.trusted = project, trusted
        self.dropped = 0
        self._by_key: dict[str, tuple[int, list[str]]] = {}
        self._local_tracked: bool | None = None

    def keep(self, path: Path, key: str, entries: list[Any], *, user: bool) -> list[Any]:
        if self.trusted or user or not entries or not self._gated(path):
            return entries
        count, files = self._by_key.get(key, (0, []))
        rel = LOCAL_FILE if path.name == "settings.local.json" else ".claude/settings.json"
        self._by_key[key] = (count + len(entries), files if rel in files else [*files, rel])
        self.dropped += len(entries)
        return []

    def _gated(self, path: Path) -> bool:
        if path.name != "settings.local.json":
            return True
        if self._local_tracked is None:  # the user's own untracked file counts untrusted; a committed one not
            from speculate.trust import git_tracks

            self._local_tracked = git_tracks(self.project, LOCAL_FILE)
        return self._local_tracked

    def notes(self) -> list[str]:
        from speculate.trust import ignoring_note

        return [ignoring_note(self.project, key, n, files) for key, (n, files) in self._by_key.items()]


class CliRuleError(SpeculateError, ValueError):
    """A rule given on the command line that cannot be used."""


def split_rules(values: Iterable[str]) -> list[str]:
    """Claude Code's ``--allowedTools`` lists: each value split at commas and blanks outside parentheses."""
    out: list[str] = []
    for value in values:
        depth, cur = 0, ""
        for ch in value:
            if ch == "(":
                depth += 1
            elif ch == ")" and depth:
                depth -= 1
            if depth == 0 and (ch == "," or ch.isspace()):
                if cur:
                    out.append(cur)
                cur = ""
                continue
            cur += ch
        if cur:
            out.append(cur)
    return out


def cli_rules(values: Iterable[str] | None, option: str, notes: list[str]) -> list[str]:
    """The rules of ``--allowedTools``/``--disallowedTools`` values. A rule for a tool speculate does not
    have is left out with a note (Claude Code's own WebFetch, say); a malformed rule, or a path (a project
    directory the option's list took in), is a :class:`CliRuleError` naming the option."""
    from speculate.permission_rules import KNOWN_TOOLS, PermissionRuleError, Rule

    out: list[str] = []
    for text in split_rules(values or ()):
        name = text.split("(", 1)[0]
        if "/" in name or name.startswith(("~", ".")) or Path(name).is_dir():
            raise CliRuleError(
                f"{option} {text!r}: a directory, not a rule (the option takes every word after it: put "
                "the project directory before it)"
            )
        try:
            Rule.parse(text, known_tools={name})
        except PermissionRuleError as e:
            raise CliRuleError(f"{option} {text!r}: {e}") from None
        if name in KNOWN_TOOLS or name.startswith("mcp__"):
            out.append(text)
        else:
            notes.append(f"{option} {text!r}: speculate has no tool {name!r}; rule ignored")
    return out
