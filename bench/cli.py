"""``speculate bench``: run the paired experiment its options describe (:mod:`bench.run_options`), write the
results directory."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import trio

from bench import provenance
from bench.harness import RunOutput, resolve_toolchains, run_experiment
from bench.plan import ARMS, RunConfig
from bench.run_options import add_options, build_config, build_parser, sensitivity_conditions
from bench.toolchain import Toolchain, ToolchainError
from bench.user import FixedThink, LogNormalThink, ThinkTime
from overlayfs import recover_all
from speculate.tempfiles import clean_stale
from speculate.term import visible


def configure(ap: argparse.ArgumentParser) -> None:
    """The options of ``speculate bench`` (on the command tree of :mod:`speculate.cli`)."""
    add_options(ap)
    ap.set_defaults(run=bench_run)


def _think_median(t: ThinkTime) -> float | None:
    if isinstance(t, LogNormalThink):
        return t.median_s
    if isinstance(t, FixedThink):
        return t.seconds
    return None


def meta_for(
    cfg: RunConfig, out: Path, res: RunOutput, prov: dict[str, object] | None = None
) -> dict[str, object]:
    return {
        "provenance": prov,
        "run_id": out.name,
        "backend": cfg.backend,
        "base_url": cfg.base_url,
        "seed": cfg.seed,
        "time_scale": cfg.time_scale,
        "reps": cfg.reps,
        "concurrency": cfg.concurrency,
        "cpus": os.cpu_count(),
        "toolchains": res.toolchains,
        "arms": list(cfg.arms),
        "mode": cfg.mode,
        "overlay_backend": cfg.overlay_backend,
        "user_edit_prob": cfg.user_edit_prob,
        "scenarios": [s.name for s in cfg.scenarios],
        "conditions": [c.label for c in cfg.conditions],
        "sensitivity": len(cfg.conditions) > 1
        and cfg.conditions == sensitivity_conditions(cfg.conditions[0]),
        "condition_params": [
            {
                "think_model": c.think.label,
                "accept_prob": c.accept_prob,
                "model_name": c.model_name,
                "think_median_s": _think_median(c.think),
                "typing_cps": c.typing_cps,
                "tab_s": c.tab_s,
                "sim": c.sim,
                "spec_value": c.spec_value,
                "spec_k": c.spec_k,
                "think_fixed_s": c.think.seconds if isinstance(c.think, FixedThink) else None,
            }
            for c in cfg.conditions
        ],
        "run": {
            "wall_s": res.wall_s,
            "interrupted": res.interrupted,
            "sessions": len(res.sessions),
            "failures": res.failures,
            "started_at": res.started_at,
        },
    }


async def _run(cfg: RunConfig, out: Path, toolchains: dict[Path | None, Toolchain]) -> RunOutput:
    scope = trio.CancelScope()
    async with trio.open_nursery() as n:

        async def watch_sigint() -> None:
            with trio.open_signal_receiver(signal.SIGINT) as sigs:
                async for _ in sigs:
                    print(
                        "\ninterrupted: stopping the running sessions; finished ones are kept",
                        file=sys.stderr,
                    )
                    scope.cancel()
                    return

        if threading_is_main():
            n.start_soon(watch_sigint)
        res = await run_experiment(cfg, out, progress=show_progress, toolchains=toolchains, cancel=scope)
        n.cancel_scope.cancel()
    return res


def show_progress(line: str) -> None:
    """A progress line on stderr; a failed session's line quotes its error, which can hold a command's output."""
    print(visible(line), file=sys.stderr, flush=True)


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def bench_main(argv: list[str]) -> int:
    if argv[:1] == ["export"]:
        from bench.export import export_main

        return export_main(argv[1:])
    ap = build_parser()
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:  # argparse has printed the error naming the option
        return int(e.code or 0)
    a.command_line = ["bench", *argv]
    return bench_run(a)


def bench_run(a: argparse.Namespace) -> int:
    if a.compare:
        from bench.compare import compare_main

        return compare_main(a.compare[0], a.compare[1], force=a.force)
    try:
        cfg = build_config(a)
    except ValueError as e:
        print(f"speculate bench: error: {e}", file=sys.stderr)
        return 2
    out = a.out or Path("results") / time.strftime("%Y%m%d-%H%M%S")
    if out.exists() and any(out.iterdir()):
        print(f"speculate bench: error: --out {out}: directory exists and is not empty", file=sys.stderr)
        return 2
    for rec in recover_all():  # acceptances a killed process left (and state of removed temp projects)
        print(rec.line(), file=sys.stderr)
    cleaned = clean_stale()  # project copies and spill directories of a killed run
    if cleaned:
        print(cleaned.line(), file=sys.stderr)
    try:  # each workspace's interpreter and test dependencies, made now so a failure is one clear line
        toolchains = resolve_toolchains(cfg.scenarios)
    except ToolchainError as e:
        print(f"speculate bench: error: {e}", file=sys.stderr)
        return 2
    n_sessions = len(cfg.conditions) * cfg.reps * len(cfg.scenarios) * len(ARMS)
    print(
        f"speculate bench: {n_sessions} sessions ({len(cfg.scenarios)} scenarios × {cfg.reps} reps × "
        f"{len(cfg.conditions)} conditions × {len(ARMS)} arms: {', '.join(ARMS)}), {cfg.concurrency} at a time, time scale "
        f"{cfg.time_scale:g}, backend {cfg.backend} → {out}",
        file=sys.stderr,
    )
    typed = getattr(a, "command_line", None) or ["bench", *sys.argv[1:]]
    prov = provenance.start(typed[1:], cfg)  # the options after "bench"
    ray_info = None
    if a.ray is not None:
        from bench.ray_runner import RayUnavailable, run_experiment_ray

        try:
            res, ray_info = run_experiment_ray(
                cfg, out, address=a.ray or None, workers=a.ray_workers, progress=show_progress
            )
        except RayUnavailable as e:
            print(f"speculate bench: error: {e}", file=sys.stderr)
            return 2
    else:
        res = trio.run(_run, cfg, out, toolchains)
    from bench.report import write_report

    meta = meta_for(cfg, out, res, provenance.finish(prov))
    if ray_info is not None:
        meta["ray"] = ray_info
    summary = write_report(out, meta, canary_leaks=res.canary_leaks)
    print((out / "report.md").read_text(encoding="utf-8").split("## Per scenario")[0])
    print(f"results: {out}/ (report.md, summary.json, turns.jsonl, sessions.jsonl, events.jsonl, *.png)")
    if res.interrupted:
        return 130
    if summary["leaks"]:
        print(
            f"speculate bench: {summary['leaks']} leak(s) into a real tree: see summary.json leak_details",
            file=sys.stderr,
        )
        return 1
    if summary["turn_errors"]:
        print(
            f"speculate bench: {len(summary['turn_errors'])} turn error(s) (model errors or unmet tool-result "
            "expectations): see report.md, Integrity",
            file=sys.stderr,
        )
        return 1
    return 1 if not res.sessions else 0
