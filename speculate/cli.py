"""The ``speculate`` command: subcommands dispatch lazily to the part that owns them."""

from __future__ import annotations

import sys
from collections.abc import Callable

USAGE = """usage: speculate [repl] [DIR] [options]      the interactive REPL (default)
       speculate bench [--quick] [options]     speculative vs plain benchmark (README's main job)
       speculate sim serve [--port 0] ...      the embedded Messages-API simulator
       speculate sim check SCENARIO.yaml       validate a scenario and replay it (unmet expectations)
       speculate import claude-code [PATH...]  Claude Code session transcripts as scenarios
       speculate check-bash "CMD"              classify a shell command (JSON)
       speculate sandbox run [opts] -- CMD     run CMD as speculative Bash would, in a throwaway overlay
       speculate stats EVENTS.jsonl            summarise a session's speculation events
       speculate recover [--abandon] [PROJECT] finish or undo an acceptance a killed process left
       speculate --help | --version
"""


def _repl(argv: list[str]) -> int:
    from speculate.repl.app import repl_main

    return repl_main(argv)


def _bench(argv: list[str]) -> int:
    from bench.cli import bench_main

    return bench_main(argv)


def _sim(argv: list[str]) -> int:
    if argv and argv[0] == "check":
        from bench.check import check_main

        return check_main(argv[1:])
    if not argv or argv[0] != "serve":
        print("usage: speculate sim serve [--port 0] [--scenario PATH ...] [--seed N] [--time-scale X]\n"
              "       speculate sim check SCENARIO.yaml ...", file=sys.stderr)
        return 2
    from speculate.sim import serve_main

    return serve_main(argv[1:])


def _import(argv: list[str]) -> int:
    from speculate.importers.claude_code import import_main

    return import_main(argv)


def _check_bash(argv: list[str]) -> int:
    from speculate.shell import check_bash_main

    return check_bash_main(argv)


def _sandbox(argv: list[str]) -> int:
    from overlayfs.sandbox.cli import sandbox_main
    from speculate.settings import load_settings
    from speculate.term import visible

    return sandbox_main(argv, show=visible, settings_env=lambda project: load_settings(project).env)


def _stats(argv: list[str]) -> int:
    from speculate.speculation.stats import stats_main

    return stats_main(argv)


def _recover(argv: list[str]) -> int:
    import argparse
    from pathlib import Path

    from overlayfs import abandon_project, recover_project

    ap = argparse.ArgumentParser(prog="speculate recover", description="Finish (roll forward) or undo (roll "
                                 "back) an acceptance that a killed speculate process left in PROJECT, and "
                                 "remove its speculation overlays. The REPL, the benchmark and every session "
                                 "do this by themselves when they start; when it cannot be done there (a "
                                 "read-only filesystem, say), they say so and this command settles it later.")
    ap.add_argument("project", nargs="?", default=".", metavar="PROJECT", help="project directory (default: .)")
    ap.add_argument("--abandon", action="store_true", help="neither finish nor undo it: keep the real tree as "
                    "it is, forget the interrupted acceptance and remove its temporary *.ovl-tmp names")
    a = ap.parse_args(argv)
    try:
        rec = abandon_project(a.project) if a.abandon else recover_project(a.project)
    except (FileNotFoundError, NotADirectoryError) as e:
        print(f"speculate recover: {e.strerror}: {e.filename}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"speculate recover: {e}", file=sys.stderr)
        return 1
    from speculate.term import visible

    if rec is not None and not rec.ok:
        print(f"speculate recover: {visible(rec.line())}", file=sys.stderr)
        return 1
    if rec is None or (rec.action is None and not rec.overlays_removed):
        print(visible(f"nothing pending for {Path(a.project).resolve()}"))
    else:
        print(visible(rec.line()))
    return 0


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "repl": _repl, "bench": _bench, "sim": _sim, "check-bash": _check_bash, "stats": _stats,
    "sandbox": _sandbox, "import": _import,
    "recover": _recover,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if args and args[0] == "--version":
        from speculate import __version__

        print(f"speculate {__version__}")
        return 0
    if args and args[0] in COMMANDS:
        return COMMANDS[args[0]](args[1:])
    if args and _looks_like_a_command(args[0]):
        import difflib

        near = difflib.get_close_matches(args[0], [*COMMANDS, "help"], n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        print(f"speculate: unknown command {args[0]!r}{hint}; commands: {', '.join(COMMANDS)}. A new project "
              f"directory of that name: speculate repl {args[0]}", file=sys.stderr)
        return 2
    return _repl(args)


def _looks_like_a_command(word: str) -> bool:
    """A bare word that is no existing path: a mistyped subcommand, not ``speculate DIR`` (which would create
    DIR with the demo in it)."""
    from pathlib import Path

    return not word.startswith(("-", ".", "~", "/")) and "/" not in word and not Path(word).exists()


if __name__ == "__main__":
    sys.exit(main())
