"""Side by side on one scenario: the real Claude Code CLI against speculate's own agent loop.

Both clients run every turn of the scenario against their own fresh simulator with the same settings (seed,
time scale, model), on a fresh copy of the project, ``reps`` times. The simulator records every request
with when it arrived and when its answer finished; from that:

- **client overhead per tool step**: from the end of an answer that calls tools to the arrival of the
  request carrying their results, i.e. the client's own work between two model calls (parsing, permission
  checks, running the tool, building the next request). File-tool steps (Read, Edit, Grep, ...) show the
  loop's overhead; steps that run a shell command are dominated by the command and are listed apart.
- **cache-read share**: cache-read input tokens over all input tokens of the agent loop's requests
  (suggestion requests excluded, reported apart), and the prompt prefix each client sends.

    .venv/bin/python -m bench.clients [--scenario fix-pagination] [--reps 3] [--time-scale 0.05] [--turns N]

prints a Markdown table (docs/simulator.md quotes one). Claude Code must be installed by scripts/setup.sh.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from speculate.sim import SimServer, load_scenario
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario import Scenario, default_scenario_dir

if TYPE_CHECKING:
    from speculate.speculation.approvals import Answer

FILE_TOOLS = {"Read", "Write", "Edit", "Glob", "Grep"}


@dataclass
class Measure:
    client: str
    file_step_ms: list[float] = field(default_factory=list)
    shell_step_ms: list[float] = field(default_factory=list)
    loop_input: int = 0  # all input tokens of the agent-loop requests
    loop_read: int = 0  # of which read from the cache
    suggestion_input: int = 0
    suggestion_read: int = 0
    prefix_tokens: list[int] = field(default_factory=list)  # input of each session's first request
    requests: int = 0
    fallbacks: int = 0

    def add_trace(self, trace: Path) -> None:
        records = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
        done: dict[str, dict[str, Any]] = {}  # "scenario turn T" -> the last record of that turn's loop
        for i, r in enumerate(records):
            usage = r["response"]["usage"]
            total = (
                usage["input_tokens"]
                + usage["cache_creation_input_tokens"]
                + usage["cache_read_input_tokens"]
            )
            source = r["served"]["source"]
            self.requests += 1
            self.fallbacks += source.startswith("fallback")
            if i == 0:
                self.prefix_tokens.append(total)
            if source.endswith("suggestion"):
                self.suggestion_input += total
                self.suggestion_read += usage["cache_read_input_tokens"]
                continue
            self.loop_input += total
            self.loop_read += usage["cache_read_input_tokens"]
            turn = source.rsplit(" step ", 1)[0]
            previous = done.get(turn)
            done[turn] = r
            if previous is None:
                continue
            calls = [b["name"] for b in previous["response"]["content"] if b["type"] == "tool_use"]
            if not calls:
                continue
            gap_ms = (r["served"]["arrived_s"] - previous["served"]["finished_s"]) * 1000
            (self.file_step_ms if set(calls) <= FILE_TOOLS else self.shell_step_ms).append(gap_ms)


def _span(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def _share(read: int, total: int) -> str:
    return f"{100 * read / total:.1f}%" if total else "-"


def table(measures: Sequence[Measure], *, scenario: str, reps: int, time_scale: float, model: str) -> str:
    rows = [
        f"Scenario `{scenario}`, {reps} run(s) per client, model {model}, time scale {time_scale:g}; "
        "ms are wall "
        "time on this machine, median (min-max) over all steps of all runs.",
        "",
        "| | " + " | ".join(m.client for m in measures) + " |",
        "|---|" + "---|" * len(measures),
        "| client overhead per file-tool step (ms) | "
        + " | ".join(_span(m.file_step_ms) for m in measures)
        + " |",
        "| ... per shell step, command included (ms) | "
        + " | ".join(_span(m.shell_step_ms) for m in measures)
        + " |",
        "| tool steps measured (file / shell) | "
        + " | ".join(f"{len(m.file_step_ms)} / {len(m.shell_step_ms)}" for m in measures)
        + " |",
        "| cache-read share, agent loop | "
        + " | ".join(_share(m.loop_read, m.loop_input) for m in measures)
        + " |",
        "| cache-read share, suggestion requests | "
        + " | ".join(_share(m.suggestion_read, m.suggestion_input) for m in measures)
        + " |",
        "| first request's prompt (tokens) | "
        + " | ".join(
            f"{statistics.median(m.prefix_tokens):,.0f}" if m.prefix_tokens else "-" for m in measures
        )
        + " |",
        "| requests (unscripted fallbacks) | "
        + " | ".join(f"{m.requests} ({m.fallbacks})" for m in measures)
        + " |",
    ]
    return "\n".join(rows)


def run_claude_code(cc_binary: Path, scenario: Scenario, path: Path, work: Path, *, seed: int,
                    time_scale: float, model: str) -> Path:  # fmt: skip
    """One Claude Code session over every turn (each next prompt the scripted one); returns its trace."""
    project = scenario.materialize(work / "project")
    trace = work / "trace.jsonl"
    cc = ClaudeCode(cc_binary, home=work / "home", extra_env={"ANTHROPIC_MODEL": model})
    with SimServer([path], seed=seed, time_scale=time_scale, record=trace) as sim:
        for i, turn in enumerate(scenario.turns):
            run = cc.turn(turn.prompt, project=project, base_url=sim.base_url, resume=i > 0)
            if run.returncode != 0:
                raise RuntimeError(f"claude exited {run.returncode} on turn {i + 1}: {run.stderr[-500:]}")
    return trace


def run_speculate(
    scenario: Scenario, path: Path, work: Path, *, seed: int, time_scale: float, model: str
) -> Path:
    """One plain (non-speculative) session of speculate's agent over every turn; returns its trace."""
    from speculate.backends import BackendConfig, open_model
    from speculate.session import SessionConfig, open_session

    project = scenario.materialize(work / "project")
    trace = work / "trace.jsonl"

    async def approve(tool: str, detail: str) -> Answer:
        return "y"

    async def main(base_url: str) -> None:
        async with open_model(BackendConfig(backend="anthropic", base_url=base_url, api_key="sim")) as m:
            cfg = SessionConfig(
                project=project,
                model=m,
                model_name=model,
                speculate=False,
                spill_dir=work / "spill",
                user_dir=work / "claude",  # not the runner's ~/.claude, as the benchmark harness does
            )
            async with open_session(cfg, ask=approve) as s:
                for turn in scenario.turns:
                    outcome = await s.submit(turn.prompt)
                    if outcome.error:
                        raise RuntimeError(f"speculate's agent failed: {outcome.error}")

    with SimServer([path], seed=seed, time_scale=time_scale, record=trace) as sim:
        trio.run(main, sim.base_url)
    return trace


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.clients", description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="fix-pagination", help="bundled scenario name or .yaml path")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--time-scale", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="claude-opus-5-5", help="the model both clients ask for")
    p.add_argument("--turns", type=int, default=None, help="only the first N turns of the scenario")
    args = p.parse_args(argv)
    path = (
        Path(args.scenario)
        if args.scenario.endswith(".yaml")
        else default_scenario_dir() / f"{args.scenario}.yaml"
    )
    scenario = load_scenario(path)
    if args.turns is not None:
        scenario = replace(scenario, turns=scenario.turns[: max(1, args.turns)])
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        print(f"bench.clients: {binary}", file=sys.stderr)
        return 2
    version = ClaudeCode(binary, home=Path(tempfile.gettempdir())).version()
    measures = [Measure(f"Claude Code {version.split()[0]}"), Measure("speculate (plain loop)")]
    with tempfile.TemporaryDirectory(prefix="speculate-clients-") as tmp:
        for rep in range(args.reps):
            for measure, run in zip(measures, (run_claude_code, run_speculate), strict=True):
                work = Path(tmp) / f"{rep}-{measure.client.split()[0]}"
                work.mkdir()
                lead = (binary,) if run is run_claude_code else ()
                trace = run(*lead, scenario, path, work,  # type: ignore[operator]  # lead: Claude Code's binary
                            seed=args.seed, time_scale=args.time_scale, model=args.model)  # fmt: skip
                measure.add_trace(trace)
                print(f"[bench.clients] rep {rep + 1}/{args.reps} {measure.client}: done", file=sys.stderr)
    name = scenario.name + (f" (first {len(scenario.turns)} turns)" if args.turns is not None else "")
    print(table(measures, scenario=name, reps=args.reps, time_scale=args.time_scale, model=args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
