"""`speculate check-bash "CMD"`: print the classification of a command as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys

from speculate.shell.classify import classify


def configure(parser: argparse.ArgumentParser) -> None:
    """The options of ``speculate check-bash`` (on the command tree of :mod:`speculate.cli`)."""
    parser.description = (
        "Classify a shell command as speculative Bash would (tree-sitter-bash): read-only, "
        "sandboxable (may run in the speculation sandbox), or risky (a speculation stops "
        "before it), with the reason, as JSON. Exit status 0 whatever the verdict; 2 for "
        "bad usage."
    )
    parser.add_argument("--root", default=None, help="project root (default: the current directory)")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="judge as if no sandbox would contain the command (interpreters become risky)",
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="the shell command (words are joined by spaces)"
    )
    parser.set_defaults(run=run, parser=parser)


def check_bash_main(argv: list[str]) -> int:
    """Entry for ``speculate check-bash [--root DIR] [--no-sandbox] CMD...``; prints JSON, returns the exit status."""
    parser = argparse.ArgumentParser(prog="speculate check-bash")
    configure(parser)
    return run(parser.parse_args(argv))


def run(ns: argparse.Namespace) -> int:
    if not ns.command:
        ns.parser.error("the following arguments are required: command")
    result = classify(
        " ".join(ns.command), project_root=ns.root or os.getcwd(), full_sandbox=not ns.no_sandbox
    )
    json.dump(
        {"read_only": result.read_only, "sandboxable": result.sandboxable, "reason": result.reason},
        sys.stdout,
    )
    sys.stdout.write("\n")
    return 0
