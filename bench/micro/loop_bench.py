"""Does a fork's file I/O stall the main turn's stream? The largest gap between text deltas of a main turn
while a speculative fork greps a 50,000-file tree, with file-tool I/O in worker threads (now) and inline on
the trio loop (before, ``speculate.tools.base.INLINE_IO``), measured in the same run, alternating.

Run: ``.venv/bin/python -m bench.micro.loop_bench [--files 50000] [--reps 2] [--time-scale 0.2]``.

The main turn is a :class:`Session` on the embedded simulator streaming a long answer (about 18 ms between
deltas at the default time scale); the "fork" is the Grep tool (its Python backend, as a fork's overlay
view uses) called on an :class:`overlayfs.Overlay` of the tree, over and over until the main turn ends, in
the same trio run. Also printed: the same turn with no fork (the floor) and the greps completed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

import trio

from speculate.tools import base as tool_base

ANSWER = " ".join(f"word{i}" for i in range(2400))  # ~17,000 chars: ~700 deltas of 24 chars
SCENARIO = f"""
name: loop-bench
description: one long streamed answer
turns:
  - prompt: "stream"
    steps:
      - text: "{ANSWER}"
"""


def build_tree(root: Path, n: int) -> None:
    for i in range(n):
        d = root / f"pkg{i % 500:03}"
        if i < 500:
            d.mkdir(parents=True)
        (d / f"mod{i:05}.py").write_text(f"def f{i}():\n    return {i}  # needle{i % 97}\n")


async def one_turn(tree: Path, fork: bool, time_scale: float) -> tuple[float, int, int]:
    """(largest gap between text deltas in s, deltas, greps the fork completed)."""
    from overlayfs import Overlay
    from speculate.models.anthropic import AnthropicModel
    from speculate.models.base import TextDelta
    from speculate.session import SessionConfig, open_session
    from speculate.sim.scenario_yaml import parse_scenario
    from speculate.sim.server import SimServer
    from speculate.tools.base import ToolContext
    from speculate.tools.grep import Grep, GrepInput

    stamps: list[float] = []

    def on_event(e: object) -> None:
        if isinstance(e, TextDelta) and e.text:
            stamps.append(time.perf_counter())

    greps = 0
    with SimServer([parse_scenario(SCENARIO)], time_scale=time_scale) as sim:
        async with (
            AnthropicModel(base_url=sim.base_url, api_key="x") as model,
            open_session(
                SessionConfig(project=tree, model=model, speculate=False, mcp=False), on_event=on_event
            ) as s,
        ):
            overlay = Overlay(lower=tree)
            ctx = ToolContext(fs=overlay, shell=s.ctx.shell, spill_dir=s.spill_dir)

            async def fork_greps(scope: trio.CancelScope) -> None:
                nonlocal greps
                with scope:
                    while True:
                        await Grep().call(GrepInput(pattern=r"needle4\b", output_mode="count"), ctx)
                        greps += 1

            try:
                async with trio.open_nursery() as nursery:
                    scope = trio.CancelScope()
                    if fork:
                        nursery.start_soon(fork_greps, scope)
                    await s.submit("stream")
                    scope.cancel()
            finally:
                overlay.discard()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return (max(gaps) if gaps else 0.0), len(stamps), greps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--time-scale", type=float, default=0.2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="loop-bench-") as tmp:
        os.environ.setdefault("SPECULATE_STATE_DIR", str(Path(tmp) / "state"))
        tree = Path(tmp) / "tree"
        t0 = time.perf_counter()
        build_tree(tree, args.files)
        print(f"tree: {args.files} files in {time.perf_counter() - t0:.1f}s; time scale {args.time_scale}")
        results: dict[str, list[tuple[float, int, int]]] = {
            "no fork": [],
            "threads (now)": [],
            "inline (before)": [],
        }
        for _ in range(args.reps):
            for label in results:
                tool_base.INLINE_IO = label == "inline (before)"
                results[label].append(trio.run(one_turn, tree, label != "no fork", args.time_scale))
        tool_base.INLINE_IO = False
    print(
        f"{'main turn while a fork greps':<30} {'largest gap (ms)':>18} {'median of reps':>15} "
        f"{'deltas':>7} {'greps':>6}"
    )
    for label, rows in results.items():
        gaps = [r[0] * 1000 for r in rows]
        print(
            f"{label:<30} {max(gaps):>18.1f} {statistics.median(gaps):>15.1f} {rows[0][1]:>7} "
            f"{sum(r[2] for r in rows) / len(rows):>6.1f}"
        )


if __name__ == "__main__":
    main()
