"""Transcripts for the import figures: Claude Code's interactive UI plays the bundled scenarios against the
simulator, a scripted user taking the ghost suggestion with Tab when it is the prompt they mean (the next
scripted prompt) and typing otherwise, after a seeded log-normal pause; then each session is imported with
its starting revision.

    .venv/bin/python -m bench.transcript_figures OUT [--scenario NAME ...] [--median-pause 2]

leaves ``OUT/home/.claude/projects`` (the transcripts), ``OUT/projects/<scenario>`` (the projects) and
``OUT/imported`` (the scenarios) and prints per scenario what Claude Code showed and the user took. Bench
them with ``speculate bench --scenarios OUT/imported ...`` against the originals (docs/transcripts.md). The
user is a script and the model the simulator: the figures check the pipeline, not what people do.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
from pathlib import Path

from bench.cc_interactive import Interactive
from bench.toolchain import workspace_toolchain
from bench.user import LogNormalThink
from bench.workspace import prepare_workspace
from speculate.importers.claude_code import ImportConfig, import_sessions
from speculate.sim import SimServer, load_scenario
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario import default_scenario_dir, default_scenario_paths

TIME_SCALE = 0.05
GIT_ENV = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "Sim User"), ("EMAIL", "sim@example.invalid"))}  # fmt: skip


def play(path: Path, out: Path, binary: Path, think: LogNormalThink, rng: random.Random) -> str:
    scenario = load_scenario(path)
    project = prepare_workspace(scenario, out / "projects" / scenario.name)
    start = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {**GIT_ENV, "PATH": workspace_toolchain(scenario.workspace).env["PATH"]}
    home = out / "home"
    before = set((home / ".claude" / "projects").glob("*/*.jsonl"))
    taken = shown = 0
    with SimServer([path], seed=0, time_scale=TIME_SCALE) as sim:
        ui = Interactive(ClaudeCode(binary, home=home, extra_env=env), project, sim.base_url)
        try:
            ui.start()
            for i, turn in enumerate(scenario.turns):
                pause = think.draw(rng) if i else 0.0
                offered = ui.turn(turn.prompt, take=True, pause_s=pause)
                shown += offered is not None
                taken += offered == turn.prompt
        finally:
            ui.close()
    (transcript,) = set((home / ".claude" / "projects").glob("*/*.jsonl")) - before
    res = import_sessions(ImportConfig(paths=(transcript,), out=out / "imported", repo=project, rev=start))
    return (
        f"{scenario.name}: {len(scenario.turns)} turns, {shown} suggestions shown, {taken} taken with Tab "
        f"-> {', '.join(p.name for p in res.written)}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--scenario", action="append", default=None, metavar="NAME")
    ap.add_argument(
        "--median-pause",
        type=float,
        default=2.0,
        help="median of the user's pauses, seconds (log-normal, sigma 0.9, cap 8 s; default 2)",
    )
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        print(f"transcript_figures: {binary}", file=sys.stderr)
        return 2
    paths = (
        [default_scenario_dir() / f"{n}.yaml" for n in a.scenario] if a.scenario else default_scenario_paths()
    )
    think = LogNormalThink(a.median_pause, 0.9, cap_s=8.0)
    rng = random.Random(a.seed)
    for path in paths:
        print(play(path, a.out, binary, think, rng), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
