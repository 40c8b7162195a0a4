"""The experiment harness: paired, interleaved plain/suggest/speculative sessions over scenarios, reps, conditions.

Three arms: ``plain`` (no suggestions; the user types every prompt), ``suggest`` (ghost-text suggestions the
user can take with Tab, but no fork: the turn then runs normally) and ``speculative`` (suggestion and fork).
``suggest`` separates what speculation buys from what the Tab shortcut buys.

Each job is one session of one arm on a fresh copy of a scenario's workspace. Jobs are queued in group
order (the three arms of a (condition, scenario, rep) group adjacent, the starting arm rotating from group
to group) and pulled by ``concurrency`` workers, so the arms of a group run at nearly the same time against
the same simulator (same seed). Finished sessions are appended to JSONL as they complete, so an interrupted
run keeps them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import trio

from bench.edits import USER_EDIT_PROB, maybe_edit
from bench.expect import check_turn
from bench.forkcheck import ForkWatch, check_fork, miss_for, wrong_suggestion
from bench.keys import session_model
from bench.progress import Progress
from bench.records import SessionRecord, TurnRecord
from bench.toolchain import DROPPED_ENV, SYSTEM_PATH, Toolchain, workspace_toolchain
from bench.user import (
    CYCLE_S,
    TAB_ACCEPT_S,
    TYPING_CHARS_PER_S,
    PlannedTurn,
    ThinkTime,
    plan_turns,
    recorded_thinks,
    typing_s,
)
from bench.workspace import CACHE_DIRS, changed, manifest, prepare_workspace, tree_hash
from speculate.backends import BackendConfig, open_model
from speculate.models.base import Model, Usage
from speculate.models.profiles import DEFAULT_MODEL
from speculate.session import PermissionMode, SessionConfig, TurnOutcome, open_session
from speculate.sim.draw import draw
from speculate.sim.realism import Realism
from speculate.sim.scenario import Scenario
from speculate.sim.script import FALLBACK_PREFIX
from speculate.speculation.approvals import ApproveFn, PendingApproval
from speculate.tempfiles import temp_dir

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
    typing_cps: float = TYPING_CHARS_PER_S
    tab_s: float = TAB_ACCEPT_S
    sim: SimKind = "ideal"

    @property
    def label(self) -> str:
        acc = "natural" if self.accept_prob is None else f"p={self.accept_prob:g}"
        policy = (f" λ={self.spec_value:g}" if self.spec_value is not None else "") + (
            f" K={self.spec_k}" if self.spec_k > 1 else "")
        extra = "".join([f" typing:{self.typing_cps:g}cps" if self.typing_cps != TYPING_CHARS_PER_S else "",
                         f" tab:{self.tab_s:g}s" if self.tab_s != TAB_ACCEPT_S else "",
                         f" sim:{self.sim}" if self.sim != "ideal" else ""])
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


async def _approve(tool: str, detail: str) -> Literal["y"]:
    return "y"  # the simulated user allows what the main agent asks for (edits are pre-allowed anyway)


async def _decline(pending: Sequence[PendingApproval]) -> Literal["n"]:
    return "n"


APPROVAL_POLICIES: dict[str, ApproveFn | None] = {"as-live": None, "decline": _decline}  # None: ask, as live


def _usage_cost(model_name: str, usage: Usage) -> float:
    from speculate.models.profiles import find_profile

    p = find_profile(model_name)
    return p.cost_usd(usage.as_dict()) if p else 0.0


def turn_record(job: Job, p: PlannedTurn, o: TurnOutcome, *, think_s: float, input_s: float, tab: bool,
                shown: str | None, at_submit: str | None, leak: list[str], miss_kind: str | None = None,
                unmet: list[str] | None = None) -> dict[str, Any]:
    usage = o.result.usage if o.result is not None else Usage()
    responses = o.result.responses if o.result is not None else []
    return {
        "session": job.session_id, "pair": job.pair, "arm": job.arm, "scenario": job.scenario.name,
        "rep": job.rep, "seed": job.seed, "cond": job.cond_index, "condition": job.condition.label,
        "think_model": job.condition.think.label, "accept_prob": job.condition.accept_prob,
        "model_name": job.condition.model_name,
        "turn": p.index, "prompt": o.prompt, "think_s": think_s, "input_s": input_s, "miss_kind": miss_kind,
        "input": "tab" if tab else "typed", "suggestion_scripted": p.scripted_suggestion, "suggestion_shown": shown,
        "suggestion_matched": shown is not None and shown == p.text, "suggestion_at_submit": at_submit,
        "accepted": o.accepted if job.arm == "speculative" else tab, "latency_s": o.latency_s,
        # An unmet tool-result expectation is a turn error: the scripted answer no longer fits the tools.
        "error": o.error or ("; ".join(f"unmet expectation: {u}" for u in unmet) if unmet else ""),
        "unmet_expectations": unmet or [], "note": o.note,
        "fallback": o.text.startswith(FALLBACK_PREFIX),  # the simulator had no scripted answer
        "stop": o.result.stop if o.result is not None else "speculated",
        "ttft_s": responses[0].ttft_s if responses else None, "requests": len(responses),
        "tokens": usage.as_dict(), "cost_usd": _usage_cost(job.condition.model_name, usage),
        "speculation": o.speculation.model_dump() if o.speculation is not None else None,
        "leak": leak,
    }


async def run_session(job: Job, model: Model, cfg: RunConfig, tmp_root: Path, toolchain: Toolchain
                      ) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """One session: returns (turn records, session record, event records). Every command it runs (both
    loops, sandboxed or not) gets ``toolchain``'s PATH."""
    work = Path(tempfile.mkdtemp(prefix="s-", dir=tmp_root))
    scale = cfg.time_scale
    try:
        project = prepare_workspace(job.scenario, work / "project")
        # The candidate the simulator offers after each turn for this seed (the same draw as the server's),
        # and under a forced hit rate the kind of miss it is.
        offers = [draw(job.scenario, i, seed=job.seed, hit_rate=job.condition.accept_prob)
                  for i in range(len(job.scenario.turns))]
        plan = plan_turns([t.prompt for t in job.scenario.turns], [c.text for c, _ in offers],
                          think=job.condition.think, seed=job.seed, scenario=job.scenario.name, rep=job.rep,
                          recorded=recorded_thinks(job.scenario))
        spec = job.arm != "plain"  # suggestions shown (both suggest and speculative)
        watch = ForkWatch(model)  # a wrong suggestion's fork: its tool results are checked too
        sc = SessionConfig(project=project, model=watch, model_name=job.condition.model_name,
                           mode=cfg.mode, speculate=spec, fork=job.arm == "speculative",
                           overlay_backend=cfg.overlay_backend,
                           spill_dir=work / "spill", user_dir=work / "claude",  # not the runner's ~/.claude
                           tool_env=toolchain.env, spec_value=job.condition.spec_value,
                           spec_candidates=job.condition.spec_k, spec_history=cfg.spec_history)
        (work / "spill").mkdir()
        turns: list[dict[str, Any]] = []
        leaks: list[dict[str, Any]] = []
        last = manifest(project)
        async with open_session(sc, ask=_approve, approve=APPROVAL_POLICIES[cfg.approval]) as s:
            t0 = time.perf_counter()
            for p in plan:
                think_s = p.think_s * scale
                await trio.sleep(think_s / 2)
                edited = None
                if p.index > 0:  # halfway through thinking, while a fork may be running
                    edited = maybe_edit(project, job.scenario.turns[p.index].steps,
                                        prob=cfg.user_edit_prob, seed=job.seed, scenario=job.scenario.name,
                                        rep=job.rep, turn=p.index)
                await trio.sleep(think_s / 2)
                shown = s.suggestion if spec else None
                cands = s.suggestions if spec else []
                # Top-K: the ghost text is the first candidate; each further one is a key press away.
                rank = cands.index(p.text) if p.text in cands else None
                tab = rank is not None
                cond = job.condition
                input_s = (cond.tab_s + CYCLE_S * (rank or 0) if tab else typing_s(p.text, cond.typing_cps)) * scale
                await trio.sleep(input_s)
                # Canary: only the speculation (and the user's own edit) ran since the last turn ended.
                now = manifest(project)
                leak = [x for x in changed(last, now) if x != edited]
                if leak:
                    leaks.append({"turn": p.index, "when": "before submit", "paths": leak})
                at_submit = s.suggestion if spec else None
                n_msgs = len(s.messages)
                o = await s.submit(p.text)
                last = manifest(project)
                unmet = check_turn(job.scenario.turns[p.index].steps, s.messages[n_msgs:])
                checked = 0
                if p.index > 0 and job.arm == "speculative" and (miss := miss_for(job.scenario, offers, p.index)):
                    fork_unmet, checked = check_fork(miss, watch.seen)
                    unmet += fork_unmet
                watch.watch(wrong_suggestion(job.scenario, offers, p.index))  # the next fork, if it is a miss
                turns.append(turn_record(job, p, o, think_s=think_s, input_s=input_s, tab=tab, shown=shown,
                                         at_submit=at_submit, leak=leak, unmet=unmet,
                                         miss_kind=offers[p.index - 1][1] if p.index > 0 else None))
                turns[-1]["user_edit"] = edited
                turns[-1]["candidates_shown"] = cands if len(cands) > 1 else None
                turns[-1]["candidate_rank"] = rank
                turns[-1]["fork_checked"] = checked
                TurnRecord.model_validate(turns[-1])  # the schema the report reads back
            wall = time.perf_counter() - t0
            events = [{"session": job.session_id, "arm": job.arm, **r.model_dump()} for r in s.events.records]
            stats = s.statistics()
        final = manifest(project)
        if changed(last, final):  # the session closed: a leftover speculation must have been discarded
            leaks.append({"turn": len(plan), "when": "after close", "paths": changed(last, final)})
        sess = {
            "session": job.session_id, "pair": job.pair, "arm": job.arm, "scenario": job.scenario.name,
            "rep": job.rep, "seed": job.seed, "cond": job.cond_index, "condition": job.condition.label,
            "wall_s": wall, "turns": len(turns), "accepted": sum(t["accepted"] for t in turns),
            "errors": sum(bool(t["error"]) for t in turns), "leaks": leaks,
            "final_tree": tree_hash({k: v for k, v in final.items() if not (set(k.split("/")) & CACHE_DIRS)}),
            "cost_usd": sum(t["cost_usd"] for t in turns) + sum(e.get("cost_usd", 0.0) for e in events),
            "statistics": stats,
        }
        SessionRecord.model_validate(sess)
        return turns, sess, events
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class RunOutput:
    turns: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    started_at: float = field(default_factory=time.time)
    wall_s: float = 0.0
    canary_leaks: list[str] = field(default_factory=list)  # changes to the bundled workspaces themselves
    toolchains: dict[str, str] = field(default_factory=dict)  # workspace -> what its commands ran with


def _describe(e: BaseException) -> str:
    """The innermost error of an exception group, which is the one worth reading."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


def _append(path: Path, recs: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, default=str) + "\n")


def _model_key(job: Job) -> tuple[int, float | None, str]:
    return job.seed, job.condition.accept_prob, job.condition.sim


def resolve_toolchains(scenarios: list[Scenario]) -> dict[Path | None, Toolchain]:
    """Each workspace's toolchain, made (once, cached) before any session starts; a ToolchainError names the
    workspace that cannot have one."""
    return {w: workspace_toolchain(w) for w in {s.workspace for s in scenarios}}


async def run_experiment(cfg: RunConfig, out_dir: Path, *, progress: Callable[[str], None] | None = None,
                         cancel: trio.CancelScope | None = None,
                         toolchains: dict[Path | None, Toolchain] | None = None,
                         jobs: list[Job] | None = None) -> RunOutput:
    """Run every job; write turns/sessions/events JSONL into ``out_dir`` as sessions finish.

    Cancelling ``cancel`` (e.g. on Ctrl-C) stops the running sessions and returns what finished.
    ``toolchains`` are the workspaces' (:func:`resolve_toolchains`), when the caller has made them already.
    ``jobs``: a part of :func:`plan_jobs` (a Ray task's session group, bench/ray_runner.py); default all.
    """
    if cfg.concurrency < 1:
        raise ValueError(f"--concurrency {cfg.concurrency}: must be >= 1")
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = plan_jobs(cfg) if jobs is None else jobs
    res = RunOutput()
    prog = Progress(jobs, cfg.concurrency, progress)
    sources = {s.workspace for s in cfg.scenarios if s.workspace is not None}
    before = {p: manifest(p) for p in sources}
    tmp_root = temp_dir("bench")  # a killed bench's copies go at the next start (speculate.tempfiles)
    t_start = time.perf_counter()
    saved_env = {k: os.environ.get(k) for k in (*DROPPED_ENV, "PATH")}
    for k in DROPPED_ENV:
        os.environ.pop(k, None)
    os.environ["PATH"] = ":".join(SYSTEM_PATH)  # whatever the caller's; sessions add their workspace's toolchain
    scope = cancel or trio.CancelScope()
    try:
        if toolchains is None:
            toolchains = await trio.to_thread.run_sync(resolve_toolchains, list({j.scenario.name: j.scenario for j in jobs}.values()))
        res.toolchains = {(w.name if w else "(none)"): t.describe for w, t in toolchains.items()}
        with scope:
            async with AsyncExitStack() as stack:
                # One simulator per (seed, forced hit rate, kind): each is part of what it draws or how.
                models: dict[tuple[int, float | None, str], Model] = {}
                keys = sorted({_model_key(j) for j in jobs}, key=str)
                simulated = cfg.backend == "sim" or (cfg.backend == "claude-cli" and cfg.base_url is None)
                for seed, hit, kind in keys if simulated else [(cfg.seed, None, "ideal")]:
                    bc = BackendConfig(backend=cfg.backend, base_url=cfg.base_url, seed=seed, hit_rate=hit,
                                       time_scale=cfg.time_scale, scenarios=cfg.scenario_paths,
                                       record=cfg.record, simulate=simulated and cfg.backend == "claude-cli",
                                       realism=Realism() if kind == "realistic" else None)
                    models[seed, hit, kind] = await stack.enter_async_context(open_model(bc))
                send, recv = trio.open_memory_channel[Job](len(jobs))
                for j in jobs:
                    send.send_nowait(j)
                send.close()

                async def worker() -> None:
                    async for job in recv:
                        model = models.get(_model_key(job)) or next(iter(models.values()))
                        t = time.perf_counter()
                        try:
                            async with session_model(model, job.session_id, own_key=job.condition.sim == "realistic") as m:
                                turns, sess, events = await run_session(job, m, cfg, tmp_root,
                                                                         toolchains[job.scenario.workspace])
                        except Exception as e:  # one broken session must not lose the others' results
                            res.failures.append({"session": job.session_id, "error": _describe(e),
                                                 "traceback": "".join(traceback.format_exception(e))})
                            _append(out_dir / "failures.jsonl", [res.failures[-1]])
                            if progress is not None:
                                progress(f"session {job.session_id} failed: {_describe(e)}")
                            prog.finished(job, time.perf_counter() - t)
                            continue
                        res.turns += turns
                        res.sessions.append(sess)
                        res.events += events
                        _append(out_dir / "turns.jsonl", turns)
                        _append(out_dir / "sessions.jsonl", [sess])
                        _append(out_dir / "events.jsonl", events)
                        prog.finished(job, time.perf_counter() - t)

                async with trio.open_nursery() as n:
                    for _ in range(min(cfg.concurrency, len(jobs))):
                        n.start_soon(worker)
        res.interrupted = scope.cancelled_caught or scope.cancel_called
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(tmp_root, ignore_errors=True)
        res.wall_s = time.perf_counter() - t_start
    for p, m in before.items():
        res.canary_leaks += [f"{p}/{c}" for c in changed(m, manifest(p))]
    return res
