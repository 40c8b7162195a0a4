"""The ``speculate`` command: one argparse tree for every subcommand, with generated help and "did you
mean" for a mistyped subcommand at any level.

Each subcommand's module owns its options: a ``configure(parser)`` function adds them and sets
``run`` (``parser.set_defaults(run=fn)``, ``fn(namespace) -> exit status``). A subcommand's module is
imported only when its name is on the command line, so ``speculate`` (the REPL) does not import the
benchmark. ``speculate [DIR] [options]`` with no subcommand is ``speculate repl``.

The benchmark (``bench/``) is not installed with the package (its name is too common to claim in
site-packages): ``speculate bench`` finds it in the source checkout this package runs from, and an
installed copy without one says so (:func:`_entry`).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from speculate import CHECKOUT
from speculate.cliparse import Parser, UsageError
from speculate.errors import SpeculateError


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    configure: str = ""  # "module:function" that adds the options and sets run; "" for a group
    children: tuple[Command, ...] = ()


COMMANDS: tuple[Command, ...] = (
    Command(
        "repl",
        "the interactive REPL (the default: `speculate [DIR] [options]`)",
        "speculate.repl.main:configure",
    ),
    Command(
        "bench", "speculative vs suggest vs plain benchmark (the README's main job)", "bench.cli:configure"
    ),
    Command(
        "sim",
        "the embedded Messages-API simulator",
        children=(
            Command("serve", "serve the simulator until interrupted", "speculate.sim.cli:configure"),
            Command(
                "check",
                "validate scenario files (`speculate bench check` replays them)",
                "speculate.sim.check:configure",
            ),
        ),
    ),
    Command(
        "check-bash",
        "classify a shell command as speculative Bash would (JSON)",
        "speculate.shell.cli:configure",
    ),
    Command(
        "sandbox",
        "the speculation sandbox",
        children=(
            Command(
                "run",
                "run a command as speculative Bash would, in a throwaway overlay (JSON summary)",
                "speculate.cli:configure_sandbox_run",
            ),
        ),
    ),
    Command(
        "stats", "summarise a session's speculation records (JSON)", "speculate.speculation.stats:configure"
    ),
    Command(
        "study",
        "the in-situ randomized study of `repl --study DIR`",
        children=(
            Command(
                "report",
                "pool study directories: saving, acceptance, cost and harm, CIs by person and session",
                "speculate.study.cli:configure",
            ),
        ),
    ),
    Command(
        "import",
        "other agents' sessions as scenarios",
        children=(
            Command(
                "claude-code",
                "Claude Code session transcripts as scenario files (docs/transcripts.md)",
                "speculate.importers.claude_code:configure",
            ),
        ),
    ),
    Command(
        "recover", "finish or undo an acceptance a killed process left", "speculate.cli:configure_recover"
    ),
)
NAMES = tuple(c.name for c in COMMANDS)
# `speculate bench export|check ARGS`: each its own argv parser ("module:function", imported only when
# named, as above).
BENCH_SUBCOMMANDS = {"export": "bench.export:export_main", "check": "bench.check:check_main"}


class NotInstalled(SpeculateError):
    """A command whose code is not part of this installed copy (the benchmark outside a checkout)."""


def _entry(target: str) -> Any:
    """The function a ``"module:function"`` target names. The benchmark's modules are imported from the
    checkout this package runs from (put first on ``sys.path``, so no other ``bench`` can shadow it)."""
    module, _, fn = target.partition(":")
    if module.partition(".")[0] == "bench":
        if not (CHECKOUT / "bench" / "__init__.py").is_file():
            raise NotInstalled(
                f"the benchmark (bench/) is part of the source checkout, not of the installed package "
                f"({CHECKOUT}): run `speculate bench` from a clone (git clone …; bash scripts/bench.sh)"
            )
        if str(CHECKOUT) not in sys.path:
            sys.path.insert(0, str(CHECKOUT))
    return getattr(import_module(module), fn)


def build_parser(argv: Sequence[str] = ()) -> Parser:
    """The whole tree; the options of a subcommand named in ``argv`` (or of all, with ``argv=None``-like
    ``("*",)``) are filled in."""
    root = Parser(
        prog="speculate",
        description="Speculative execution for LLM coding agents. "
        "`speculate [DIR] [options]` runs the REPL (`speculate repl --help`); with no DIR on the "
        "simulator it is the bundled demo.",
        epilog="`speculate COMMAND --help` describes each command's options.",
    )
    root.add_argument("--version", action="store_true", help="print the version and exit")
    _add(root, COMMANDS, set(argv), prefix="speculate")
    return root


def _add(
    parser: argparse.ArgumentParser, commands: Sequence[Command], words: set[str], *, prefix: str
) -> None:
    sub = parser.add_subparsers(
        title="commands", metavar="COMMAND", dest=f"{prefix.replace(' ', '_')}_cmd", parser_class=Parser
    )
    for c in commands:
        p = sub.add_parser(
            c.name,
            help=c.summary,
            description=c.summary[:1].upper() + c.summary[1:] + ".",
            prog=f"{prefix} {c.name}",
        )
        if c.children:
            p.set_defaults(run=_group_help(p))
            _add(p, c.children, words, prefix=f"{prefix} {c.name}")
        elif c.name in words or "*" in words:
            _entry(c.configure)(p)


def _group_help(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """A group named without its subcommand (``speculate sim``): its help, and a usage error."""

    def run(_: argparse.Namespace) -> int:
        p.print_help(sys.stderr)
        return 2

    return run


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args)
    except NotInstalled as e:
        print(f"speculate {args[0]}: {e}", file=sys.stderr)
        return 2


def _main(args: list[str]) -> int:
    if args[:1] == ["bench"] and args[1:2] and args[1] in BENCH_SUBCOMMANDS:
        # subcommands of a command that otherwise takes only options
        status: int = _entry(BENCH_SUBCOMMANDS[args[1]])(args[2:])
        return status
    if args[:1] == ["help"]:  # `speculate help bench` is `speculate bench --help`
        args = [*args[1:], "--help"] if args[1:] else ["--help"]
    if not args or (args[0] not in NAMES and args[0] not in ("-h", "--help", "--version")):
        if args and _looks_like_a_command(args[0]):
            near = difflib.get_close_matches(args[0], [*NAMES, "help"], n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            print(
                f"speculate: unknown command {args[0]!r}{hint}; commands: {', '.join(NAMES)}. A new project "
                f"directory of that name: speculate repl {args[0]}",
                file=sys.stderr,
            )
            return 2
        args = ["repl", *args]
    parser = build_parser(args)
    try:
        ns = parser.parse_args(args)
    except UsageError as e:
        return e.status
    if ns.version:
        from speculate import __version__

        print(f"speculate {__version__}")
        return 0
    ns.command_line = args  # as typed (less "speculate"): what a run records as its provenance
    run = getattr(ns, "run", None)
    if run is None:
        parser.print_help()
        return 0
    try:
        return int(run(ns))
    except UsageError as e:  # a run function's own ArgumentParser.error()
        return e.status


def _looks_like_a_command(word: str) -> bool:
    """A bare word that is no existing path: a mistyped subcommand, not ``speculate DIR`` (which would create
    DIR with the demo in it)."""
    return not word.startswith(("-", ".", "~", "/")) and "/" not in word and not Path(word).exists()


# -- the two small commands that live here -----------------------------------------------------------------
def configure_sandbox_run(p: argparse.ArgumentParser) -> None:
    from overlayfs.sandbox.cli import configure

    configure(p)
    p.set_defaults(run=_sandbox_run)


def _sandbox_run(ns: argparse.Namespace) -> int:
    from overlayfs.sandbox.cli import run
    from speculate.settings import load_settings
    from speculate.term import visible

    return run(ns, show=visible, settings_env=lambda project: load_settings(project).env)


def configure_recover(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Finish (roll forward) or undo (roll back) an acceptance that a killed speculate process "
        "left in PROJECT, and remove its speculation overlays and the temporary files of speculate "
        "processes that are gone. The REPL, the benchmark and every session do this by themselves "
        "when they start; when it cannot be done there (a read-only filesystem, say), they say so "
        "and this command settles it later."
    )
    p.add_argument(
        "project", nargs="?", default=".", metavar="PROJECT", help="project directory (default: .)"
    )
    p.add_argument(
        "--abandon",
        action="store_true",
        help="neither finish nor undo it: keep the real tree as it is, forget the interrupted "
        "acceptance, say which files are new and which old, and remove the temporary *.ovl-tmp names "
        "that hold nothing else (the others are kept and listed)",
    )
    p.set_defaults(run=_recover)


def _recover(a: argparse.Namespace) -> int:
    from overlayfs import abandon_project, recover_project
    from speculate.tempfiles import clean_stale
    from speculate.term import visible

    try:
        rec = abandon_project(a.project) if a.abandon else recover_project(a.project, scan=True, adopt=True)
    except (FileNotFoundError, NotADirectoryError) as e:
        print(f"speculate recover: {e.strerror}: {e.filename}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"speculate recover: {e}", file=sys.stderr)
        return 1
    if rec is not None and not rec.ok:
        print(f"speculate recover: {visible(rec.line())}", file=sys.stderr)
        return 1
    if rec is None or (rec.action is None and not rec.overlays_removed):
        print(visible(f"nothing pending for {Path(a.project).resolve()}"))
    else:
        print(visible(rec.line()))
    cleaned = clean_stale()
    if cleaned:
        print(visible(cleaned.line()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
