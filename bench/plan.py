"""What a benchmark run is: its arms, its conditions (the cells of a sweep), its configuration, and its jobs
(one session of one arm each) in group order with the starting arm rotating, each rep with its own seed.
Running one job is :mod:`bench.session_run`'s, running them all :mod:`bench.harness`'s."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.edits import USER_EDIT_PROB
from bench.user import TAB_ACCEPT_S, TYPING_CHARS_PER_S, ThinkTime
from speculate.models.profiles import DEFAULT_MODEL
from speculate.session import PermissionMode, SpecEdits
from speculate.sim.scenario import Scenario

Arm = Literal["plain", "suggest", "speculative"]
Approval = Literal["as-live", "decline"]
ARMS: tuple[Arm, ...] = ("plain", "suggest", "speculative")


SimKind = Literal["ideal", "realistic"]


@dataclass(frozen=True, kw_only=True)
class Condition:
    """One cell of the sweep: think-time model, forced acceptance, model (latency profile), how fast the user
    types and takes a suggestion, and which simulator (ideal, or the less ideal API of speculate.sim.realism).

    ``accept_prob`` forces the share of suggestions that are the user's next prompt (the simulator's hit
    rate, speculate.sim.draw); the user still takes only a suggestion equal to the prompt, so acceptance
    follows it while every turn stays on its script. None: the scenarios' own candidate weights.
    """

    think: ThinkTime
    accept_prob: float | None = None
    model_name: str = DEFAULT_MODEL
    # The speculation policy's dial λ (None: always fork) and top-K (speculate.speculation.policy, topk).
    spec_value: float | None = None
    spec_k: int = 1
    # A fork's edit that the live path would ask about (default mode): "stop" before it, or "ask" on
    # acceptance (SessionConfig.spec_edits); the simulated user answers as it answers the live path.
    spec_edits: SpecEdits = "stop"
    typing_cps: float = TYPING_CHARS_PER_S
    tab_s: float = TAB_ACCEPT_S
    sim: SimKind = "ideal"

    @property
    def label(self) -> str:
        acc = "natural" if self.accept_prob is None else f"p={self.accept_prob:g}"
        policy = (f" λ={self.spec_value:g}" if self.spec_value is not None else "") + (
            f" K={self.spec_k}" if self.spec_k > 1 else ""
        )
        extra = "".join(
            [
                f" typing:{self.typing_cps:g}cps" if self.typing_cps != TYPING_CHARS_PER_S else "",
                f" tab:{self.tab_s:g}s" if self.tab_s != TAB_ACCEPT_S else "",
                f" sim:{self.sim}" if self.sim != "ideal" else "",
                f" edits:{self.spec_edits}" if self.spec_edits != "stop" else "",
            ]
        )
        return f"{self.think.label} {acc} {self.model_name}{extra}{policy}"


@dataclass(kw_only=True)
class RunConfig:
    scenarios: list[Scenario]
    conditions: list[Condition]
    reps: int = 3
    seed: int = 0
    time_scale: float = 1.0
    backend: str = "sim"
    base_url: str | None = None
    scenario_paths: list[Path] = field(default_factory=list)  # what the simulator serves
    concurrency: int = 4
    mode: PermissionMode = "acceptEdits"
    overlay_backend: str = "auto"
    record: Path | None = None  # anthropic backend: append every request/response to this trace
    out: Path = Path("results")
    arms: tuple[Arm, ...] = ARMS  # ``sim check`` replays the plain arm only
    user_edit_prob: float = USER_EDIT_PROB  # harm: the user edits a file mid-think (bench/edits.py)
    # What the simulated user answers on accepting a speculation that ran commands the live path would
    # have asked about: "as-live" as it answers the live path's questions (yes, _approve); "decline": no,
    # so such a speculation is discarded and the turn runs live (what parity costs a cautious user).
    approval: Approval = "as-live"
    spec_history: dict[str, Any] | None = None  # a policy history every speculative session starts from
    accept_rule: str = "outcome"  # the simulated user's decision rule (bench/user.py, ACCEPT_RULES)


@dataclass(frozen=True)
class Job:
    index: int
    cond_index: int
    condition: Condition
    scenario: Scenario
    rep: int
    arm: Arm
    seed: int

    @property
    def pair(self) -> str:
        return f"c{self.cond_index}/{self.scenario.name}/r{self.rep}"

    @property
    def session_id(self) -> str:
        return f"{self.pair}/{self.arm}"


def rep_seed(seed: int, rep: int) -> int:
    """An independent seed per (run seed, rep): ``--seed 0`` and ``--seed 1`` share no rep (seed + rep did)."""
    digest = hashlib.sha256(f"bench-rep:{seed}:{rep}".encode()).digest()
    return int.from_bytes(digest[:7], "big")


def plan_jobs(cfg: RunConfig) -> list[Job]:
    jobs: list[Job] = []
    n = 0
    for ci, cond in enumerate(cfg.conditions):
        for rep in range(cfg.reps):
            for scn in cfg.scenarios:
                k = n % len(cfg.arms)  # rotate which arm starts, so no arm always runs first
                n += 1
                for arm in cfg.arms[k:] + cfg.arms[:k]:
                    jobs.append(Job(len(jobs), ci, cond, scn, rep, arm, rep_seed(cfg.seed, rep)))
    return jobs
