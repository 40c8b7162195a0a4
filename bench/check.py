"""``speculate bench check SCENARIO.yaml``: validate a scenario and replay it before benchmarking it.

Loading reports format errors as ``file:line: reason`` (:mod:`speculate.sim.check`, which checks only that).
The replay runs every turn once in the plain arm (think time 0, fast clock) on a fresh copy of the scenario's
workspace, through the real agent loop and tools with the workspace's own toolchain (bench/toolchain.py), and
lists each turn's unmet tool-result expectations, model errors and simulator fallbacks (a turn the script
could not answer), and what it verified: how many of the turn's tool results an expectation checked. A turn
whose tool results no expectation covers is "replay unverified" (the simulator answers from the script
whatever the tools return, so such a turn would replay "as scripted" even if every Read failed); ``--strict``
makes that a failure. Candidates other than the intent are validated but not replayed (their steps run only when
a user takes them) unless ``--misses``: then the speculative arm runs once more with every suggestion wrong
(forced acceptance 0) and a long think time, so each turn's wrong suggestion is forked, runs to its end in the
sandbox, and its tool results are checked against the candidate's expectations (bench/forkcheck.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
from functools import partial
from pathlib import Path

import trio

from bench.harness import RunOutput, resolve_toolchains, run_experiment
from bench.plan import Condition, RunConfig
from bench.toolchain import Toolchain, ToolchainError
from bench.user import FixedThink
from speculate.sim.check import load_all
from speculate.sim.scenario import Scenario
from speculate.tempfiles import temp_dir
from speculate.term import visible

PROG = "speculate bench check"
CHECK_TIME_SCALE = 0.02
MISS_THINK_S = 300.0  # simulated; at the check's time scale 6 s of wall time for a fork's real commands

Toolchains = dict[Path | None, Toolchain]


def configure(ap: argparse.ArgumentParser) -> None:
    """The options of ``speculate bench check``."""
    ap.description = (
        "Validate scenario files (format errors as file:line: reason), then replay each once "
        "through the real agent loop and tools, and list every turn's unmet expectations, model "
        "errors and simulator fallbacks. The replay runs on a fresh copy of the scenario's "
        "workspace with the workspace's own toolchain, or, with --project DIR, on a copy of DIR "
        "with your PATH, as `speculate repl DIR --scenario FILE` would."
    )
    ap.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO.yaml")
    ap.add_argument(
        "--time-scale",
        type=float,
        default=CHECK_TIME_SCALE,
        help=f"clock speed of the replay (default {CHECK_TIME_SCALE})",
    )
    ap.add_argument("--no-replay", action="store_true", help="only validate the files")
    ap.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a turn's replay is unverified (tool calls, but no expectation to check them)",
    )
    ap.add_argument(
        "--misses",
        action="store_true",
        help="also fork every turn's wrong suggestion (forced "
        "acceptance 0, the speculative arm) and check its tool results",
    )
    ap.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="replay on a copy of DIR (never DIR itself) with this shell's PATH, instead of the "
        "scenario's workspace and toolchain",
    )
    ap.set_defaults(run=check_run)


def check_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="speculate bench check")
    configure(ap)
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    return check_run(a)


def check_run(a: argparse.Namespace) -> int:
    if a.project is not None and not a.project.is_dir():
        print(f"{PROG}: --project {str(a.project)!r} is not a directory", file=sys.stderr)
        return 2
    loaded = load_all(a.scenarios, prog=PROG)
    if loaded is None:
        return 2
    if a.project is not None:  # a copy of the project as it is, as `repl DIR --scenario` uses DIR itself
        scenarios = [dataclasses.replace(s, workspace=a.project.resolve(), files={}) for s in loaded]
        print(visible(f"{PROG}: replaying on a copy of {a.project.resolve()} with this shell's PATH"))
    else:
        scenarios = loaded
    if a.no_replay:
        return 0
    try:
        toolchains = (
            {a.project.resolve(): Toolchain(os.environ.get("PATH", ""), "the caller's PATH")}
            if a.project is not None
            else resolve_toolchains(scenarios)
        )
    except ToolchainError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    bad = 0
    seen = Verified()
    for s, path in zip(scenarios, a.scenarios, strict=True):
        bad += _replay(s, path, toolchains, a.time_scale, seen)
        if a.misses:
            bad += _misses(s, path, toolchains, a.time_scale)
    print(PROG + ": " + verdict(bad, seen, strict=a.strict))
    return 1 if bad or (a.strict and seen.unverified) else 0


@dataclasses.dataclass
class Verified:
    """What the replays verified, over every turn of every file checked."""

    turns: int = 0
    results: int = 0  # tool results the replays returned
    checked: int = 0  # those an expectation checked
    unverified: int = 0  # turns with tool results and no expectation checking any
    unchecked_errors: int = 0  # tool results that were errors, with no expectation

    def add(self, tally: dict[str, int]) -> str:
        """Count one turn; what its line says it verified."""
        self.turns += 1
        n, k, errs = tally["results"], tally["checked"], tally["unchecked_errors"]
        self.results += n
        self.checked += k
        self.unchecked_errors += errs
        failed = f"; {errs} unchecked tool result(s) were errors" if errs else ""
        if n == 0:
            return "no tool calls"
        if k == 0:
            self.unverified += 1
            return f"replay unverified: no expectation checked its {n} tool result(s){failed}"
        return f"{k} of {n} tool result(s) checked{failed}"


def verdict(bad: int, v: Verified, *, strict: bool) -> str:
    """The summary line: problems first; "replayed as scripted" only for what expectations verified."""
    checked = f"{v.checked} of {v.results} tool result(s) checked by expectations"
    errors = f", {v.unchecked_errors} unchecked result(s) were errors" if v.unchecked_errors else ""
    if bad:
        return f"{bad} problem(s); {checked}{errors}"
    if v.unverified:
        return (
            f"replay unverified on {v.unverified} of {v.turns} turn(s) (tool calls no expectation checks); "
            f"{checked}{errors}" + (" (--strict: failed)" if strict else "")
        )
    return f"all turns replayed as scripted; {checked}{errors}"


def _run(cfg: RunConfig, toolchains: Toolchains) -> RunOutput:
    out = temp_dir("check")
    try:
        return trio.run(partial(run_experiment, cfg, out, toolchains=toolchains))
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _replay(s: Scenario, path: Path, toolchains: Toolchains, time_scale: float, seen: Verified) -> int:
    """Every turn once in the plain arm; the problems found (what it verified is added to ``seen``)."""
    cfg = RunConfig(
        scenarios=[s],
        conditions=[Condition(think=FixedThink(0))],
        reps=1,
        arms=("plain",),
        time_scale=time_scale,
        scenario_paths=[path],
        concurrency=1,
        user_edit_prob=0.0,
    )
    res = _run(cfg, toolchains)
    for f in res.failures:
        print(visible(f"{path}: session failed: {f['error']}"))
    bad = len(res.failures)
    for t in sorted(res.turns, key=lambda t: t["turn"]):
        problems = (["simulator fallback (the script has no answer here)"] if t["fallback"] else []) + (
            [t["error"]] if t["error"] else []
        )
        tally = t.get("expect_tally") or {"results": 0, "checked": 0, "unchecked_errors": 0}
        what = seen.add(tally)
        if problems:
            status = "; ".join(problems) + f" ({what})"
        else:
            status = what if what.startswith("replay unverified") else f"ok, {what}"
        bad += bool(problems)
        print(visible(f"{path}: turn {t['turn'] + 1} {t['prompt'][:50]!r}: {status}"))
    return bad


def _misses(s: Scenario, path: Path, toolchains: Toolchains, time_scale: float) -> int:
    """Fork each turn's wrong suggestion to its end and check its tool results; the problems found."""
    cfg = RunConfig(
        scenarios=[s],
        conditions=[Condition(think=FixedThink(MISS_THINK_S), accept_prob=0.0)],
        reps=1,
        arms=("speculative",),
        time_scale=time_scale,
        scenario_paths=[path],
        concurrency=1,
        user_edit_prob=0.0,
    )
    res = _run(cfg, toolchains)
    for f in res.failures:
        print(visible(f"{path}: misses: session failed: {f['error']}"))
    bad = len(res.failures)
    for t in sorted(res.turns, key=lambda t: t["turn"]):
        if t["turn"] == 0:
            continue
        problems = [u for u in t["unmet_expectations"] if u.startswith("miss fork:")]
        if t["fork_checked"] == 0 and not problems:
            problems = ["the fork ran no checked tool (it did not start, or stopped at a boundary)"]
        bad += bool(problems)
        status = "; ".join(problems) if problems else f"ok, {t['fork_checked']} tool result(s) checked"
        print(
            visible(
                f"{path}: miss before turn {t['turn'] + 1} ({(t['suggestion_scripted'] or '')[:40]!r}): {status}"
            )
        )
    return bad
