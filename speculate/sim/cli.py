"""``speculate sim serve``: run the simulator in the foreground until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from speculate.sim.replay import TraceError
from speculate.sim.scenario import ScenarioError, default_scenario_paths
from speculate.sim.server import FaultConfig, SimServer


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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply simulated durations (1 = real time)"
    )
    p.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="total rate of injected faults, split evenly over 529, 429, drop and stall",
    )
    return p


def serve_main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``speculate sim serve``; prints the base URL, serves until SIGINT/SIGTERM."""
    args = build_parser().parse_args(argv)
    scenarios = list(args.scenario) if args.scenario is not None else default_scenario_paths()
    rate = args.fault_rate / 4
    try:
        faults = FaultConfig(overloaded_rate=rate, rate_limit_rate=rate, drop_rate=rate, stall_rate=rate)
        sim = SimServer([*scenarios, *args.trace], seed=args.seed, time_scale=args.time_scale, faults=faults,
                        port=args.port)  # fmt: skip
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
