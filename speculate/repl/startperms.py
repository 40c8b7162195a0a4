"""The permissions a REPL session starts with: the command line's rules and directories, the workspace's
trust (asked once on a terminal where it changes something, and recorded where Claude Code records it), and
the starting mode."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from speculate.repl.options import DEMO_MODE
from speculate.term import visible

if TYPE_CHECKING:
    from speculate.permissions import Mode


@dataclass
class Permissions:
    """What the command line and the workspace's trust make of the session's permissions."""

    mode: Mode
    from_settings: bool  # the mode is the settings' permissions.defaultMode
    allow: list[str]
    deny: list[str]
    add_dirs: list[str]
    trusted: bool
    notes: list[str]


def _permissions(args: argparse.Namespace, project: Path, *, own: bool, demo: bool) -> Permissions:
    """The options' rules and directories, the workspace's trust (asked once on a terminal where it changes
    something; ``own``: a demo project speculate made, trusted as its own) and the starting mode."""
    from speculate.settings import load_settings
    from speculate.settings_modes import cli_rules, starting_mode

    notes: list[str] = []
    allow = cli_rules(args.allowed_tools, "--allowedTools", notes)
    deny = cli_rules(args.disallowed_tools, "--disallowedTools", notes)
    dirs = [str(Path(d).expanduser().resolve()) for d in args.add_dir]  # relative: to where speculate runs
    notes += [f"--add-dir {d}: no such directory" for d in dirs if not Path(d).is_dir()]
    trusted = own or _trust(project)
    settings = load_settings(project, trusted=trusted)  # its errors are the session's: said before it opens
    fallback: Mode = DEMO_MODE if demo else "default"
    mode = starting_mode(args.mode, settings.default_mode, fallback)
    from_settings = args.mode is None and settings.default_mode is not None
    return Permissions(mode, from_settings, allow, deny, dirs, trusted, notes)


def _trust(project: Path) -> bool:
    """Whether the workspace is trusted: as recorded, else (on a terminal, where the project has entries
    that only trust lets count) the user's answer, recorded where Claude Code records it."""
    from speculate.settings import load_settings
    from speculate.trust import is_trusted

    if is_trusted(project):
        return True
    gated = load_settings(project, trusted=False).untrusted_ignored
    if not gated or not sys.stdin.isatty():
        return False  # the session's notes say what is ignored and how to trust it
    return ask_trust(project, gated)  # nothing else runs yet: the loop may wait on the terminal


def ask_trust(
    project: Path, gated: int, *, read: Callable[[str], str] = input, write: Callable[[str], None] = print
) -> bool:
    """Ask once whether the user trusts the files in ``project``; a yes is recorded in Claude Code's global
    config (:func:`speculate.trust.record_trust`), so Claude Code does not ask there again either."""
    from speculate.trust import global_config_path, record_trust

    what = "entry" if gated == 1 else "entries"
    write(
        visible(
            f"Do you trust the files in this folder? {project}\n"
            f"Its settings hold {gated} permission {what} (permissions.allow, additionalDirectories) that, "
            "as in Claude Code, count only in a trusted workspace; they let commands run without asking."
        )
    )
    try:
        answer = read("Trust this folder? [y/n] ").strip().lower()
    except (EOFError, KeyboardInterrupt):  # no answer is a no
        answer = ""
    if answer not in ("y", "yes"):
        write("not trusted: those entries are ignored in this session (you will be asked again next time)")
        return False
    key = record_trust(project)
    write(
        visible(
            f"trusted: recorded as projects[{str(key)!r}].hasTrustDialogAccepted in {global_config_path()} "
            "(Claude Code reads it too)"
            if key is not None
            else "trusted for this session only: the home folder's trust is never recorded (as in Claude Code)"
        )
    )
    return True
