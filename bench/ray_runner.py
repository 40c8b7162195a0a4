"""``speculate bench --ray [ADDRESS]``: the same sweep, its session groups run as Ray tasks.

A *group* is what the local harness keeps together: the arms of one (condition, scenario, rep), paired and
interleaved against one simulator seed. Each group is one Ray task (one CPU). On the node it lands on, the
task checks that the node can sandbox speculative Bash (else the group fails with the reason), makes the
workspace's toolchain there (bench/toolchain.py, cached per node) and runs the group's sessions with the
local harness (``run_experiment`` with the group's jobs: the same plan, seeds and draws as a local run), then
returns the records. The driver appends them to the run directory as they come, exactly as a local run
does, so the report and ``--compare`` read both alike.

Without an address Ray starts locally (``ray.init()``; ``workers`` caps its CPUs, so the number of groups
run at once); with one it joins an existing cluster, shipping this checkout as the job's ``working_dir``
(docs/experiments.md, "Sweeps on Ray"). Ray is an optional extra: ``pip install -e '.[ray]'``.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.harness import RunOutput
from bench.plan import Job, RunConfig, plan_jobs
from speculate.errors import SpeculateError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class RayUnavailable(SpeculateError, RuntimeError):
    """Ray is not installed (the ``ray`` extra) or cannot start / reach the cluster."""


@dataclass
class GroupResult:
    """What one task sends back: the records, and where and how long it ran."""

    pair: str
    node: str
    turns: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    canary_leaks: list[str] = field(default_factory=list)
    toolchains: dict[str, str] = field(default_factory=dict)
    started_at: float = 0.0  # wall clock (time.time) on the node
    inner_s: float = 0.0  # the harness's own wall time for the group (sessions, toolchain, simulator)
    task_s: float = 0.0  # the whole task on the node (imports, sandbox check included)


def groups_of(jobs: list[Job]) -> list[list[Job]]:
    """Jobs by session group (pair), in plan order: a group's arms stay together and keep their rotation."""
    out: dict[str, list[Job]] = {}
    for j in jobs:
        out.setdefault(j.pair, []).append(j)
    return list(out.values())


def _localize(job: Job) -> Job:
    """The job with this node's copy of a bundled scenario (its workspace path is the node's); a scenario
    from elsewhere travels as it is."""
    from speculate.sim.scenario import default_scenario_paths
    from speculate.sim.scenario_yaml import load_scenario

    for path in default_scenario_paths():
        if path.stem == job.scenario.name or path.name == f"{job.scenario.name}.yaml":
            local = load_scenario(path)
            if local.name == job.scenario.name:
                return replace(job, scenario=local)
    return job


def run_group(cfg: RunConfig, jobs: list[Job]) -> GroupResult:
    """One session group on this node (the Ray task's body; also callable without Ray)."""
    t0 = time.perf_counter()
    started = time.time()
    import trio

    from bench.harness import run_experiment
    from overlayfs.sandbox.policy import sandbox_problem

    node = socket.gethostname()
    res = GroupResult(pair=jobs[0].pair, node=node, started_at=started)
    problem = sandbox_problem()
    if problem is not None:  # the sweep measures sandboxed speculation: a node without it fails its groups
        res.failures = [
            {
                "session": j.session_id,
                "error": f"node {node} cannot sandbox speculative Bash: {problem}",
                "traceback": "",
            }
            for j in jobs
        ]
        res.task_s = time.perf_counter() - t0
        return res
    jobs = [_localize(j) for j in jobs]
    scenarios = list({j.scenario.name: j.scenario for j in jobs}.values())
    local = replace(cfg, scenarios=scenarios, concurrency=min(cfg.concurrency, len(jobs)))
    with tempfile.TemporaryDirectory(prefix="speculate-ray-") as tmp:
        t1 = time.perf_counter()
        try:
            out = trio.run(lambda: run_experiment(local, Path(tmp), jobs=jobs))
        except Exception as e:  # a toolchain that cannot be made here, say: the group fails with the reason
            res.failures = [
                {
                    "session": j.session_id,
                    "error": f"on node {node}: {type(e).__name__}: {e}",
                    "traceback": "",
                }
                for j in jobs
            ]
        else:
            res.turns, res.sessions, res.events = out.turns, out.sessions, out.events
            res.failures, res.canary_leaks, res.toolchains = out.failures, out.canary_leaks, out.toolchains
        res.inner_s = time.perf_counter() - t1
    res.task_s = time.perf_counter() - t0
    return res


def _init(address: str | None, workers: int | None) -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "Ray is not installed: pip install -e '.[ray]' (scripts/setup.sh does)"
        ) from None
    if address:
        # A cluster: ship this checkout (the scenarios and the package) with the job; results are returned.
        env = {
            "working_dir": str(PROJECT_ROOT),
            "excludes": [".venv", "results", ".git", "**/__pycache__", "*.png"],
            "env_vars": {"PYTHONPATH": "."},
        }
        try:
            ray.init(address=address, runtime_env=env, log_to_driver=False)
        except Exception as e:
            raise RayUnavailable(f"--ray {address}: cannot join the cluster: {e}") from None
    else:
        # Workers start with this interpreter, so they import the installed packages as the driver does;
        # the benchmark itself is not installed, so they find it in this checkout as the driver did.
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": _pythonpath()}},
        )
    return ray


def _pythonpath() -> str:
    return os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)


def _append(path: Path, recs: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, default=str) + "\n")


def run_experiment_ray(
    cfg: RunConfig,
    out_dir: Path,
    *,
    address: str | None = None,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[RunOutput, dict[str, Any]]:
    """Run every session group as a Ray task; write turns/sessions/events/failures JSONL into ``out_dir`` as
    groups finish. Returns the run's output (as ``run_experiment``'s) and what Ray added: per-group node,
    task and harness wall times, and the overhead per group (driver round trip less the harness's time)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ray = _init(address, workers)
    res = RunOutput()
    t_start = time.perf_counter()
    groups = groups_of(plan_jobs(cfg))
    ray_cpus = ray.cluster_resources()
    remote = ray.remote(num_cpus=1, max_retries=0)(run_group)
    submitted: dict[Any, tuple[list[Job], float]] = {}
    timing: list[dict[str, Any]] = []
    try:
        for g in groups:
            submitted[remote.remote(cfg, g)] = (g, time.perf_counter())
        pending = list(submitted)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            ref = done[0]
            g, sent = submitted[ref]
            try:
                r: GroupResult = ray.get(ref)
            except Exception as e:  # the task itself died (a node lost): its sessions fail, the rest go on
                r = GroupResult(
                    pair=g[0].pair,
                    node="?",
                    failures=[
                        {
                            "session": j.session_id,
                            "error": f"Ray task failed: {type(e).__name__}: {e}",
                            "traceback": "",
                        }
                        for j in g
                    ],
                )
            round_trip = time.perf_counter() - sent
            timing.append(
                {
                    "pair": r.pair,
                    "node": r.node,
                    "task_s": r.task_s,
                    "inner_s": r.inner_s,
                    "round_trip_s": round_trip,
                }
            )
            res.turns += r.turns
            res.sessions += r.sessions
            res.events += r.events
            res.failures += r.failures
            res.canary_leaks += r.canary_leaks
            res.toolchains.update(r.toolchains)
            _append(out_dir / "turns.jsonl", r.turns)
            _append(out_dir / "sessions.jsonl", r.sessions)
            _append(out_dir / "events.jsonl", r.events)
            if r.failures:
                _append(out_dir / "failures.jsonl", r.failures)
            if progress is not None:
                progress(
                    f"[ray {time.perf_counter() - t_start:.0f}s] group {r.pair} on {r.node}: "
                    f"{len(r.sessions)} sessions, {len(r.failures)} failed · {len(timing)}/{len(groups)} groups"
                )
    except KeyboardInterrupt:
        for ref in submitted:
            ray.cancel(ref, force=True)
        res.interrupted = True
    finally:
        ray.shutdown()
        res.wall_s = time.perf_counter() - t_start
    slots = workers or _cpus(ray_cpus)
    inner = sum(t["inner_s"] for t in timing)
    info = {
        "address": address or "local",
        "workers": slots,
        "groups": len(groups),
        # A worker slot's time not spent in the harness (task start-up, imports, the sandbox check,
        # scheduling, the idle tail), per group; and the part of it on the node.
        "overhead_per_group_s": (res.wall_s * slots - inner) / len(timing) if timing and slots else None,
        "node_overhead_per_group_s": (
            sum(t["task_s"] - t["inner_s"] for t in timing) / len(timing) if timing else None
        ),
        "nodes": sorted({t["node"] for t in timing}),
        "per_group": timing,
        "pid": os.getpid(),
    }
    return res, info


def _cpus(resources: dict[str, Any]) -> int | None:
    cpus = resources.get("CPU")
    return int(cpus) if cpus else None
