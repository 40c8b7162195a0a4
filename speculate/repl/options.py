"""The options of ``speculate repl`` (:func:`speculate.repl.main.configure` puts them on the command tree)
and the permission modes its ``--help`` explains; the demo's mode."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from speculate.backends import MODEL_BACKENDS
from speculate.models.anthropic import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, STALL_ATTEMPTS
from speculate.repl.controller import MODES

if TYPE_CHECKING:
    from speculate.permissions import Mode


MODE_HELP = {
    "default": "asks before each edit and each command no allow rule covers (Claude Code's default; "
    "'manual' names it too)",
    "acceptEdits": "edits files in the project without asking; commands still ask",
    "bypassPermissions": "asks nothing (deny rules still refuse)",
    "plan": "read-only: refuses every edit and every command that may write",
    "dontAsk": "never asks: what would ask is refused (allow rules and read-only calls still run)",
}
DEMO_MODE: Mode = (
    "acceptEdits"  # the simulator demo flows without a question per edit; said in --help and at start
)


def add_options(p: argparse.ArgumentParser) -> None:
    """The options of ``speculate repl``."""
    p.description = (
        "Interactive coding agent with speculative execution: after each answer it predicts "
        "your next prompt (grey ghost text) and runs it ahead in a sandboxed copy-on-write "
        "overlay; Tab takes the prediction, Enter sends it, and a finished speculation answers "
        "at once."
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "permission modes (--permission-mode, /mode):\n"
        + "\n".join(f"  {m:<18} {h}" for m, h in MODE_HELP.items())
        + f"\nThe default is `default`; the simulator demo (no DIR, or --scenario) starts in {DEMO_MODE} "
        "so that it flows. Without --permission-mode the settings' permissions.defaultMode comes first "
        "(local, project, user; bypassPermissions only from the user's).\n"
        "Workspace trust: until a project is trusted (Claude Code's record in ~/.claude.json), its "
        "permissions.allow and additionalDirectories are ignored; on a terminal the REPL asks once where "
        "that matters, and a yes trusts the folder for Claude Code too."
    )
    p.add_argument(
        "dir",
        nargs="?",
        metavar="DIR",
        help="project directory (default: with --model sim, a temporary copy of the demo "
        "scenario's project; otherwise the current directory). A new or empty DIR gets the "
        "demo project; an existing one is used as it is",
    )
    p.add_argument(
        "--model",
        choices=tuple(MODEL_BACKENDS),
        default="sim",
        help="model backend (default sim: the embedded simulator)",
    )
    p.add_argument(
        "--base-url",
        help="an Anthropic-compatible endpoint (with --model anthropic, or claude-cli: the CLI's ANTHROPIC_BASE_URL)",
    )
    p.add_argument("--model-name", default=None, help="model id sent in requests")
    p.add_argument(
        "--scenario",
        default=None,
        metavar="NAME|FILE",
        help="simulator demo scenario: a bundled name or a .yaml file (default: fix-pagination)",
    )
    p.add_argument(
        "--permission-mode",
        "--mode",
        dest="mode",
        choices=(*MODES, "manual"),
        default=None,
        help=f"permission mode (default: the settings' defaultMode, else default; the demo: {DEMO_MODE}); "
        "see below",
    )
    p.add_argument(
        "--allowedTools",
        "--allowed-tools",
        dest="allowed_tools",
        nargs="+",
        action="extend",
        default=[],
        metavar="RULES",
        help='allow rules, as in Claude Code: comma- or space-separated (e.g. "Bash(git log:*) Edit"), '
        "joined to the settings' permissions.allow",
    )
    p.add_argument(
        "--disallowedTools",
        "--disallowed-tools",
        dest="disallowed_tools",
        nargs="+",
        action="extend",
        default=[],
        metavar="RULES",
        help="deny rules, in the same form, joined to the settings' permissions.deny",
    )
    p.add_argument(
        "--add-dir",
        dest="add_dir",
        nargs="+",
        action="extend",
        default=[],
        metavar="DIR",
        help="more working directories, besides the project (as permissions.additionalDirectories)",
    )
    p.add_argument("--no-spec", action="store_true", help="start with speculation off")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="simulator speed: 1.0 is real time, 0.1 ten times faster",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=CONNECT_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for the model endpoint to accept a connection (default {CONNECT_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--read-timeout",
        type=float,
        default=READ_TIMEOUT_S,
        metavar="S",
        help=f"seconds without a byte from the model (before its headers, or mid-stream) before the "
        f"request is retried, at most {STALL_ATTEMPTS} tries in all (default {READ_TIMEOUT_S:g})",
    )
    p.add_argument("--events", type=Path, default=None, help="write speculation records (JSONL) here")
    p.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --model anthropic: save every request/response with timings (a replayable trace)",
    )
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --model sim: also serve a trace recorded with --record",
    )
    p.add_argument(
        "--on-diverge",
        choices=("keep", "abort"),
        default="keep",
        help="typing off the ghost text: keep its speculation running until a different prompt is "
        "sent (editing back brings the ghost back; its extra tokens are recorded), or abort it",
    )
    p.add_argument("--plain", action="store_true", help="line mode even on a terminal")
    p.add_argument(
        "--spec-value",
        type=_spec_value,
        default=None,
        metavar="λ",
        help="fork only where value × P(accept) × expected saving > (1 − P) × expected cost; value in "
        "dollars per second saved ('inf': always, the default; settings: speculation.value)",
    )
    p.add_argument(
        "--spec-candidates",
        type=int,
        choices=range(1, 6),
        default=None,
        metavar="K",
        help="top-K: suggest and speculate up to K candidates (settings: speculation.candidates)",
    )
    p.add_argument(
        "--spec-edits",
        choices=("ask", "stop"),
        default=None,
        help="a speculation's edit that the live path would ask about (default mode): 'ask' writes it into "
        "the speculation and asks on acceptance, showing its diff (the default); 'stop' stops the "
        "speculation before it (settings: speculation.edits; docs/speculation.md)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue this project's last saved session: its conversation, mode and /diff last (never "
        "a speculation that was not accepted)",
    )
    g.add_argument(
        "-r",
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="continue the saved session ID of this project (without ID: the last one; /resume lists them)",
    )
    from speculate.repl.study import add_options as add_study_options

    add_study_options(p)


def build_parser() -> argparse.ArgumentParser:
    from speculate.cliparse import Parser

    p = Parser(prog="speculate repl")
    add_options(p)
    return p


def _spec_value(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{s!r} is not a number (dollars per second saved, or inf)"
        ) from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"{s}: must be >= 0")
    return v
