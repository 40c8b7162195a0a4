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
    p = argparse.ArgumentParser(prog="speculate sim serve", description="Serve the Messages API simulator.")
    p.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: pick a free one)")
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
    return p


def serve_main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``speculate sim serve``; prints the base URL, serves until SIGINT/SIGTERM."""
    args = build_parser().parse_args(argv)
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
