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

import json
import os
import shutil
import time
import traceback
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from bench.keys import session_model
from bench.plan import Job, RunConfig, plan_jobs
from bench.progress import Progress
from bench.session_run import run_session
from bench.toolchain import DROPPED_ENV, SYSTEM_PATH, Toolchain, workspace_toolchain
from bench.workspace import changed, manifest
from speculate.backends import MODEL_BACKENDS, BackendConfig, open_model
from speculate.models.base import Model
from speculate.sim.realism import Realism
from speculate.sim.scenario import Scenario
from speculate.tempfiles import temp_dir


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


async def run_experiment(
    cfg: RunConfig,
    out_dir: Path,
    *,
    progress: Callable[[str], None] | None = None,
    cancel: trio.CancelScope | None = None,
    toolchains: dict[Path | None, Toolchain] | None = None,
    jobs: list[Job] | None = None,
) -> RunOutput:
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
    os.environ["PATH"] = ":".join(
        SYSTEM_PATH
    )  # whatever the caller's; sessions add their workspace's toolchain
    scope = cancel or trio.CancelScope()
    try:
        if toolchains is None:
            toolchains = await trio.to_thread.run_sync(
                resolve_toolchains, list({j.scenario.name: j.scenario for j in jobs}.values())
            )
        res.toolchains = {(w.name if w else "(none)"): t.describe for w, t in toolchains.items()}
        with scope:
            async with AsyncExitStack() as stack:
                # One simulator per (seed, forced hit rate, kind): each is part of what it draws or how.
                models: dict[tuple[int, float | None, str], Model] = {}
                keys = sorted({_model_key(j) for j in jobs}, key=str)
                backend = MODEL_BACKENDS[cfg.backend]
                simulated = backend.on_simulator(cfg.base_url)
                for seed, hit, kind in keys if simulated else [(cfg.seed, None, "ideal")]:
                    bc = BackendConfig(
                        backend=cfg.backend,
                        base_url=cfg.base_url,
                        seed=seed,
                        hit_rate=hit,
                        time_scale=cfg.time_scale,
                        scenarios=cfg.scenario_paths,
                        record=cfg.record,
                        simulate=simulated and backend.starts_simulator,
                        realism=Realism() if kind == "realistic" else None,
                    )
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
                            async with session_model(
                                model, job.session_id, own_key=job.condition.sim == "realistic"
                            ) as m:
                                turns, sess, events = await run_session(
                                    job, m, cfg, tmp_root, toolchains[job.scenario.workspace]
                                )
                        except Exception as e:  # one broken session must not lose the others' results
                            res.failures.append(
                                {
                                    "session": job.session_id,
                                    "error": _describe(e),
                                    "traceback": "".join(traceback.format_exception(e)),
                                }
                            )
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
