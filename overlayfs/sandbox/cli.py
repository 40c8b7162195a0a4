"""``speculate sandbox run [options] -- CMD``: run CMD exactly as speculative Bash would, in a fresh overlay of
a project, print its output and a JSON summary (exit, backend, limits hit, the environment variables passed,
the overlay's changes), then discard the overlay. The project itself is never changed.

Two things come from the caller (``speculate.cli``), since overlayfs imports nothing of speculate: ``show``,
which renders the command's untrusted output for a terminal (speculate.term.visible), and ``settings_env``,
the variable names the project's settings pass into the sandbox (``speculation.env``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

USAGE = (
    "speculate sandbox run [--backend auto|kernel|fuse|fuse-overlayfs] [--project DIR] [--timeout S] -- CMD"
)


DESCRIPTION = (
    "Run CMD exactly as speculative Bash would: in the sandbox (bubblewrap, user namespace, seccomp, "
    "Landlock, cgroup and rlimit bounds) on a fresh copy-on-write overlay of the project. Prints the "
    "command's output and a JSON summary (exit status, backend, limits hit, the environment variables "
    "passed, the overlay's changes), then discards the overlay: the project itself never changes."
)


def configure(ap: argparse.ArgumentParser) -> None:
    """The options of ``speculate sandbox run`` (``speculate.cli`` sets what runs them)."""
    ap.description = DESCRIPTION
    ap.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "kernel", "fuse", "fuse-overlayfs"],
        help="mount backend of the overlay (default auto: kernel, else fuse)",
    )
    ap.add_argument(
        "--project", type=Path, default=Path.cwd(), help="the project (default: the current directory)"
    )
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds (default 120)")
    ap.add_argument(
        "--upper-bytes", type=int, default=None, help="bound on the overlay's writes (default 1 GiB)"
    )
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the shell command, after --")
    ap.set_defaults(parser=ap)


def sandbox_main(
    argv: list[str], *, show: Callable[[str], str], settings_env: Callable[[Path], Sequence[str]]
) -> int:
    if not argv or argv[0] != "run":
        print(f"usage: {USAGE}", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser(prog="speculate sandbox run")
    configure(ap)
    return run(ap.parse_args(argv[1:]), show=show, settings_env=settings_env)


def run(
    a: argparse.Namespace, *, show: Callable[[str], str], settings_env: Callable[[Path], Sequence[str]]
) -> int:
    ap: argparse.ArgumentParser = a.parser
    words = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not words:
        ap.error("no command given: speculate sandbox run -- CMD")
    if not a.project.is_dir():
        ap.error(f"--project {str(a.project)!r} is not a directory")
    if a.timeout <= 0:
        ap.error(f"--timeout must be positive, not {a.timeout}")

    from overlayfs import Overlay
    from overlayfs.sandbox import (
        SandboxLimits,
        SandboxSetupFailed,
        SandboxUnavailable,
        run_sandboxed,
        sandbox_env,
    )

    try:
        limits = SandboxLimits(**({"upper_bytes": a.upper_bytes} if a.upper_bytes is not None else {}))
    except ValueError as e:
        ap.error(str(e))
    try:
        env = sandbox_env(passed=settings_env(a.project.resolve()))
    except ValueError as e:  # a malformed settings file: the message names the file and the key
        print(show(f"speculate sandbox: {e}"), file=sys.stderr)
        return 2
    ov = Overlay(a.project)
    try:
        t0 = time.perf_counter()
        try:
            r = run_sandboxed(
                ov, " ".join(words), timeout=a.timeout, backend=a.backend, limits=limits, env=env
            )
        except (SandboxUnavailable, SandboxSetupFailed) as e:
            print(show(f"speculate sandbox: {e}"), file=sys.stderr)
            return 3
        elapsed = time.perf_counter() - t0
        changes = [{"path": c.path, "kind": c.kind, "type": c.type} for c in ov.changes()]
    finally:
        ov.discard()
    sys.stdout.write(show(r.stdout))
    sys.stderr.write(show(r.stderr))
    summary = {
        "exit": r.exit_code,
        "backend": r.backend,
        "timed_out": r.timed_out,
        "limit": r.limit,
        "backend_failed": r.backend_failed,
        "seconds": round(elapsed, 4),
        "enforced": r.enforced,
        "env": sorted(env),
        "changes": changes,
        "project": str(ov.lower),
        "discarded": True,
    }
    print(json.dumps(summary, indent=2))
    return r.exit_code
