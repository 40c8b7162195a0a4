"""The ``speculate`` command: subcommands dispatch lazily to the part that owns them."""

from __future__ import annotations

import sys
from collections.abc import Callable

USAGE = """usage: speculate [repl] [DIR] [options]      the interactive REPL (default)
       speculate bench [--quick] [options]     speculative vs plain benchmark (README's main job)
       speculate sim serve [--port 0] ...      the embedded Messages-API simulator
       speculate check-bash "CMD"              classify a shell command (JSON)
       speculate sandbox run [opts] -- CMD     run CMD as speculative Bash would, in a throwaway overlay
       speculate stats EVENTS.jsonl            summarise a session's speculation events
       speculate --help | --version
"""


def _repl(argv: list[str]) -> int:
    from speculate.repl.app import repl_main

    return repl_main(argv)


def _bench(argv: list[str]) -> int:
    from bench.cli import bench_main

    return bench_main(argv)


def _sim(argv: list[str]) -> int:
    if not argv or argv[0] != "serve":
        print("usage: speculate sim serve [--port 0] [--scenario PATH ...] [--seed N] [--time-scale X]",
              file=sys.stderr)
        return 2
    from speculate.sim import serve_main

    return serve_main(argv[1:])


def _check_bash(argv: list[str]) -> int:
    from speculate.shell import check_bash_main

    return check_bash_main(argv)


def _sandbox(argv: list[str]) -> int:
    from overlayfs.sandbox.cli import sandbox_main

    return sandbox_main(argv)


def _stats(argv: list[str]) -> int:
    from speculate.spec.stats import stats_main

    return stats_main(argv)


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "repl": _repl, "bench": _bench, "sim": _sim, "check-bash": _check_bash, "stats": _stats,
    "sandbox": _sandbox,
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
    return _repl(args)


if __name__ == "__main__":
    sys.exit(main())
