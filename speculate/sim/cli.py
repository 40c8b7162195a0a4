"""``speculate sim serve``: run the simulator in the foreground until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from speculate.sim.clients import DEFAULT_SUGGESTION_PATTERNS, ClientConventions
from speculate.sim.faults import FaultConfig
from speculate.sim.ratelimit import RateLimits
from speculate.sim.realism import Realism
from speculate.sim.replay import TraceError
from speculate.sim.scenario import ScenarioError, default_scenario_paths
from speculate.sim.server import SimServer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="speculate sim serve")
    configure(p)
    return p


def port(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{n} is out of range: a port is 0 to 65535 (0 picks a free one)")
    return n


def configure(p: argparse.ArgumentParser) -> None:
    """The options of ``speculate sim serve`` (on the command tree of :mod:`speculate.cli`)."""
    p.description = (
        "Serve the Messages-API simulator on 127.0.0.1 in the foreground until interrupted "
        "(SIGINT or SIGTERM): scripted scenarios, recorded traces, prompt caching, latencies, "
        "rate limits and injected faults, for any client (docs/simulator.md)."
    )
    p.add_argument(
        "--port", type=port, default=0, help="TCP port on 127.0.0.1, 0 to 65535 (0: pick a free one)"
    )
    p.add_argument(
        "--scenario",
        action="append",
        type=Path,
        default=None,
        metavar="PATH",
        help="scenario .yaml (repeatable; default: bench/scenarios/*.yaml)",
    )
    p.add_argument(
        "--trace",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="recorded trace .jsonl to replay with its latencies (repeatable)",
    )
    p.add_argument(
        "--record", type=Path, default=None, metavar="FILE",
        help="append every served request and response, with timings, to this trace (replayable)",
    )  # fmt: skip
    p.add_argument(
        "--suggestion-pattern", action="append", default=[], metavar="REGEX",
        help="also treat a last user message matching REGEX as a prompt-suggestion request (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--enforce-rate-limits", action="store_true",
        help="answer 429 when a request does not fit the rate-limit buckets (headers are always sent)",
    )  # fmt: skip
    p.add_argument(
        "--realistic", action="store_true",
        help="a less ideal API: per-key rate limits enforced by queueing (Tier 1), heavy-tailed TTFT, draws not "
        "shared between API keys (speculate/sim/realism.py)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--hit-rate", type=float, default=None, metavar="P",
        help="make each suggestion the scenario's next prompt with probability P, otherwise a wrong one with "
        "work behind it (default: the scenario's candidate weights)",
    )  # fmt: skip
    p.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply simulated durations (1 = real time)"
    )
    p.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="total rate of injected faults, split evenly over 529, 429, drop, stall and in-stream error",
    )
    p.set_defaults(run=serve_run)


def serve_main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``speculate sim serve``; prints the base URL, serves until SIGINT/SIGTERM."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    return serve_run(args)


def serve_run(args: argparse.Namespace) -> int:
    scenarios = list(args.scenario) if args.scenario is not None else default_scenario_paths()
    try:
        faults = FaultConfig.spread(args.fault_rate)
        patterns = (*DEFAULT_SUGGESTION_PATTERNS, *args.suggestion_pattern)
        conventions = ClientConventions(suggestion_patterns=patterns)
        sim = SimServer([*scenarios, *args.trace], seed=args.seed, hit_rate=args.hit_rate,
                        time_scale=args.time_scale, faults=faults,
                        port=args.port, conventions=conventions, record=args.record,
                        rate_limits=RateLimits(enforce=args.enforce_rate_limits),
                        realism=Realism() if args.realistic else None)  # fmt: skip
    except (ScenarioError, TraceError, ValueError) as exc:
        print(f"speculate sim serve: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        with sim:
            print(f"speculate simulator listening on {sim.base_url}  "
                  f"({len(sim.scenarios)} scenarios, {len(args.trace)} traces)", flush=True)  # fmt: skip
            try:
                while not done.wait(0.5):
                    pass
            except KeyboardInterrupt:
                pass
    except OSError as exc:
        print(f"speculate sim serve: cannot listen on port {args.port}: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
