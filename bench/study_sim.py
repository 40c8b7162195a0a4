"""A simulated study: programs in place of people, driving sessions on the embedded simulator through the
Python API with a study recorder (:mod:`speculate.study.recorder`), so that ``speculate study report`` has
something to pool. It checks the pipeline; it measures nothing about people.

Each simulated person has their own habits, drawn from the run's seed: how often they take a suggestion as
it is, how often they take it and edit it, how long they think (log-normal) and how fast they type. A turn:
the prompt is ready; the person looks up after a think time; a suggestion shown by then (never in the plain
arm) is taken (Tab, Enter), edited (Tab, a few more words, Enter), or ignored (they type a question of their
own); with none shown they type the scenario's next prompt. Edited and ignored prompts are off the scenario's
script, so the simulator answers them with its fallback and the script waits for its next prompt.

    python -m bench.study_sim --out results/study-sim --people 3 --sessions 2 --time-scale 0.25
    speculate study report results/study-sim/*
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import trio

from bench.user import typing_s
from speculate.study.arms import DEFAULT_ARMS, Arm, parse_arms
from speculate.study.recorder import StudyRecorder

DEFAULT_SCENARIOS = (
    "fix-pagination",
    "add-low-stock-command",
    "explain-codebase",
    "rename-format-price",
    "inventory-ignored-suggestions",
    "replace-utils-module",
)
DETOURS = (
    "what else calls this?",
    "show me the tests for it first",
    "why did you choose that approach?",
    "is there a simpler way?",
)
EDITS = (" too", " and explain why", ", briefly", " please")
TAB_S = 0.2  # Tab, then Enter


@dataclass(frozen=True)
class Person:
    """One simulated participant's habits (fixed for all their sessions)."""

    name: str
    take: float  # probability of taking a shown suggestion as it is
    edit: float  # probability of taking it and editing it
    think_median_s: float
    typing_cps: float
    patient: bool = False  # waits for the suggestion however long it takes (tests: no turn without one)

    @staticmethod
    def draw(name: str, rng: random.Random) -> Person:
        return Person(
            name,
            take=rng.uniform(0.45, 0.8),
            edit=rng.uniform(0.05, 0.2),
            think_median_s=rng.uniform(3.0, 8.0),
            typing_cps=rng.uniform(3.5, 6.5),
        )

    def think_s(self, rng: random.Random) -> float:
        return min(60.0, rng.lognormvariate(math.log(self.think_median_s), 0.8))


Decision = Literal["take", "edit", "ignore"]


def decide(person: Person, rng: random.Random) -> Decision:
    u = rng.random()
    return "take" if u < person.take else "edit" if u < person.take + person.edit else "ignore"


async def run_session(
    *,
    study_dir: Path,
    person: Person,
    scenario: str,
    seed: int,
    arms: Sequence[Arm],
    time_scale: float,
    work: Path,
    max_turns: int | None = None,
    decisions: Sequence[Decision] | None = None,
    backend: str = "sim",
) -> StudyRecorder:
    """One session of ``person`` on a bundled ``scenario``; returns its recorder (its file is ``.path``).
    ``decisions``, when given, replaces the person's draws turn by turn (tests). ``backend``: ``sim``, or
    ``anthropic`` (the SDK against the simulator served over HTTP) or ``claude-cli`` (the Claude Code CLI
    against it): the simulator answers in every case."""
    from speculate.repl.demo import find_scenario, prepare_project
    from speculate.session import SessionConfig, open_session
    from speculate.sim.scenario_yaml import load_scenario

    path = find_scenario(scenario)
    scn = load_scenario(path)
    project = prepare_project(scn, work / "project")
    rng = random.Random(f"{seed}:{person.name}:{scenario}")
    rec = StudyRecorder(
        study_dir=study_dir,
        user=person.name,
        seed=seed,
        arms=arms,
        model=backend,
        frontend="api",
        time_scale=time_scale,
    )

    async def yes(*_: Any) -> Literal["y"]:
        return "y"

    prompts = [t.prompt for t in scn.turns]
    pos, turns, decided = 0, 0, list(decisions or [])
    limit = max_turns if max_turns is not None else len(prompts) + 3
    async with (
        _model(backend, path, time_scale) as model,
        open_session(
            SessionConfig(
                project=project,
                model=model,
                mode="acceptEdits",
                spill_dir=work / "spill",
                tool_env=_tool_env(scn),
            ),
            ask=yes,
            approve=yes,
            on_event=rec.on_event,
        ) as session,
    ):
        rec.attach(session)
        while pos < len(prompts) and turns < limit:
            # The person looks up after thinking; a suggestion that came by then is on screen (ghost text).
            look = person.think_s(rng) * time_scale
            start, shown = trio.current_time(), None
            if session.cfg.speculate:
                with trio.move_on_after(60.0 if person.patient else look):
                    shown = rec.offer(await session.wait_suggestion(), "model")
            await trio.sleep_until(start + look)
            if shown is not None:
                await trio.sleep(rng.uniform(0.5, 1.5) * time_scale)  # reading it
            choice = (decided.pop(0) if decided else decide(person, rng)) if shown is not None else "type"
            if choice == "take":
                rec.key(took_ghost=True)
                await trio.sleep(TAB_S * time_scale)
                prompt = shown
            elif choice == "edit":
                rec.key(took_ghost=True)
                extra = rng.choice(EDITS)
                await trio.sleep((TAB_S + typing_s(extra, person.typing_cps)) * time_scale)
                prompt = f"{shown}{extra}"
            else:
                prompt = rng.choice(DETOURS) if choice == "ignore" else prompts[pos]
                rec.key()
                await trio.sleep(typing_s(prompt, person.typing_cps) * time_scale)
            assert prompt is not None
            rec.submitted(prompt)
            await session.submit(prompt)
            turns += 1
            if prompt in prompts[pos:]:
                pos = prompts.index(prompt, pos) + 1
    rec.close()
    return rec


@asynccontextmanager
async def _model(backend: str, scenario: Path, time_scale: float) -> AsyncIterator[Any]:
    from speculate.backends import MODEL_BACKENDS, BackendConfig, open_model
    from speculate.sim.server import SimServer

    kind = MODEL_BACKENDS[backend]
    if not kind.on_simulator(None):  # an API client: pointed at a simulator serving the scenario
        with SimServer(scenarios=[scenario], time_scale=time_scale) as sim:
            async with open_model(BackendConfig(backend=backend, base_url=sim.base_url, api_key="sim")) as m:
                yield m
        return
    cfg = BackendConfig(
        backend=backend, scenarios=[scenario], time_scale=time_scale, simulate=kind.starts_simulator
    )
    async with open_model(cfg) as m:
        yield m


def _tool_env(scn: Any) -> dict[str, str] | None:
    """The workspace's own interpreter and test dependencies (bench/toolchain.py), as the bench runs them."""
    from bench.toolchain import ToolchainError, workspace_toolchain

    try:
        return workspace_toolchain(scn.workspace).env
    except ToolchainError as e:
        print(f"note: {e}; commands run with this process's PATH", file=sys.stderr)
        return None


async def run_study(
    *,
    out: Path,
    people: int,
    sessions: int,
    seed: int,
    arms: Sequence[Arm],
    time_scale: float,
    scenarios: Sequence[str],
) -> list[Path]:
    """``people`` × ``sessions`` sessions, one after another; each person's directory is ``out/person-N``."""
    rng = random.Random(seed)
    crowd = [Person.draw(f"sim-{i + 1}", rng) for i in range(people)]
    files: list[Path] = []
    k = 0
    for person in crowd:
        for s in range(sessions):
            scenario = scenarios[k % len(scenarios)]
            work = out / ".work" / f"{person.name}-{s}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            try:
                rec = await run_session(
                    study_dir=out / f"person-{person.name.split('-')[1]}",
                    person=person,
                    scenario=scenario,
                    seed=seed * 1000 + k,
                    arms=arms,
                    time_scale=time_scale,
                    work=work,
                )
            finally:
                shutil.rmtree(work, ignore_errors=True)
            print(f"{person.name} session {s + 1}: {scenario}, {rec.turn} turns -> {rec.path}", flush=True)
            files.append(rec.path)
            k += 1
    shutil.rmtree(out / ".work", ignore_errors=True)
    return files


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.study_sim", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="where each person's study directory goes")
    p.add_argument("--people", type=int, default=3)
    p.add_argument("--sessions", type=int, default=2, help="sessions per person")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS))
    p.add_argument("--time-scale", type=float, default=0.25)
    p.add_argument(
        "--scenario", nargs="+", default=list(DEFAULT_SCENARIOS), help="bundled scenarios, in turn"
    )
    a = p.parse_args(argv)
    if a.people < 1 or a.sessions < 1 or not a.time_scale > 0:
        p.error("--people and --sessions must be at least 1, --time-scale above 0")
    try:
        arms = parse_arms(a.arms)
    except ValueError as e:
        p.error(str(e))
    trio.run(
        lambda: run_study(
            out=a.out,
            people=a.people,
            sessions=a.sessions,
            seed=a.seed,
            arms=arms,
            time_scale=a.time_scale,
            scenarios=a.scenario,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
