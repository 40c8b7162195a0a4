"""The options of ``speculate bench`` and what they make: the scenarios to run, the conditions (the
sensitivity table's among them) and the :class:`~bench.plan.RunConfig`. Running it is
:mod:`bench.cli`'s job."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from bench import option_values
from bench.edits import USER_EDIT_PROB
from bench.plan import Condition, RunConfig
from bench.thinkfit import resolve_think
from bench.user import (
    ACCEPT_RULES,
    DEFAULT_ACCEPT_RULE,
    LOGNORMAL_SIGMA,
    TAB_ACCEPT_S,
    TYPING_CHARS_PER_S,
    FixedThink,
    LogNormalThink,
    ThinkTime,
)
from speculate.backends import MODEL_BACKENDS
from speculate.models.profiles import DEFAULT_MODEL
from speculate.sim.scenario import Scenario, check_unique, default_scenario_paths
from speculate.sim.scenario_yaml import load_scenario

# Defaults sized so the full run stays under 15 minutes on 2 cores at real time (see docs/experiments.md).
DEFAULT_REPS = 3  # 12 bundled scenarios x 3 reps = 36 session clusters per arm (>= 30 for the bootstrap)
DEFAULT_CONCURRENCY = 6
QUICK_TIME_SCALE = 0.2


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="speculate bench")
    add_options(ap)
    return ap


def add_options(ap: argparse.ArgumentParser) -> None:
    """The options of ``speculate bench`` (:func:`bench.cli.configure` puts them on the command tree)."""
    ap.description = (
        "Speculative vs suggest vs plain agent loop: paired, interleaved sessions on the embedded "
        "simulator (or a real backend); results in a directory per run. "
        "`speculate bench export RUN --format parquet|csv` writes a run's turns as a table; "
        "`speculate bench check SCENARIO.yaml` validates scenario files and replays each once."
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"every scenario once (1 rep: one cluster each), time scale {QUICK_TIME_SCALE}",
    )
    ap.add_argument(
        "--scenario",
        "--scenarios",
        action="append",
        nargs="+",
        default=[],
        metavar="NAME",
        help="bundled scenario name, path to a scenario YAML or a directory of them (repeatable; "
        "default: all bundled)",
    )
    ap.add_argument(
        "--reps", type=int, default=None, help=f"repetitions per scenario (default {DEFAULT_REPS})"
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="base seed; rep r uses a seed hashed from (seed, r): runs with different seeds share "
        "no rep (default 0)",
    )
    ap.add_argument(
        "--think-time",
        default="lognormal",
        metavar="lognormal|fixed:SECONDS|file:PATH|recorded|fit[:PATH,...]",
        help="think-time model (default lognormal: median 5 s, sigma 0.9, cap 60 s); recorded: each "
        "imported turn's own; fit: a log-normal fitted to the scenarios' recorded think times (or to "
        "those of the scenarios or transcripts at PATH), parameters printed (docs/transcripts.md)",
    )
    ap.add_argument(
        "--sweep-think",
        type=lambda s: option_values.floats(s, "--sweep-think"),
        default=None,
        metavar="0,2,5,10",
        help="also run fixed think times (seconds), for the break-even curve",
    )
    ap.add_argument(
        "--accept-prob",
        type=option_values.rates,
        default=None,
        metavar="P[,P]",
        help="acceptance sweep: the simulated model suggests the user's next prompt with probability "
        "P (else a wrong suggestion with work behind it); 'natural' is the scenarios' own weights; "
        "several values give a sweep, e.g. natural,0,0.25,0.5,0.75,1",
    )
    ap.add_argument(
        "--profile",
        default=None,
        metavar="MODEL[,MODEL]",
        help=f"simulated model(s), i.e. latency/price profile(s) (default {DEFAULT_MODEL})",
    )
    ap.add_argument(
        "--typing-cps",
        type=lambda s: option_values.floats(s, "--typing-cps"),
        default=None,
        metavar="CPS[,CPS]",
        help=f"the simulated user's typing speed, characters per second (default {TYPING_CHARS_PER_S:g}; "
        "several values give one condition each)",
    )
    ap.add_argument(
        "--tab-s",
        type=lambda s: option_values.floats(s, "--tab-s"),
        default=None,
        metavar="S[,S]",
        help=f"seconds to take a suggestion with Tab and Enter (default {TAB_ACCEPT_S:g})",
    )
    ap.add_argument(
        "--sim",
        default="ideal",
        metavar="ideal|realistic[,...]",
        help="the simulator: ideal (default), or realistic: per-key rate limits enforced by queueing, "
        "heavy-tailed TTFT, draws not shared between arms (docs/simulator.md)",
    )
    ap.add_argument(
        "--sensitivity",
        action="store_true",
        help="one condition per assumption varied from the base (think-time median 2 and 10 s, "
        "another profile, slow and fast typing, a slow Tab, the realistic simulator): the README's "
        "sensitivity table",
    )
    ap.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help="simulated time per real second (1.0 = real time; think and typing times are scaled too)",
    )
    ap.add_argument(
        "--model",
        choices=tuple(MODEL_BACKENDS),
        default="sim",
        help="backend (default sim); claude-cli: the Claude Code CLI with text tool calling, against the "
        "embedded simulator unless --base-url is given",
    )
    ap.add_argument(
        "--base-url",
        default=None,
        help="an Anthropic-compatible endpoint (with --model anthropic, or "
        "claude-cli: the CLI's ANTHROPIC_BASE_URL)",
    )
    ap.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --model anthropic: save every request/response with timings (replayable trace)",
    )
    ap.add_argument(
        "--permission-mode",
        "--mode",
        dest="mode",
        default="acceptEdits",
        choices=("default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"),
        help="every session's permission mode (default acceptEdits). The bench's workspaces are its own "
        "copies of the scenarios' projects: it trusts them (their settings' allow rules count) without "
        "recording it in ~/.claude.json",
    )
    ap.add_argument("--overlay-backend", default="auto", choices=("auto", "pure", "fuse", "kernel"))
    ap.add_argument("--out", type=Path, default=None, help="results directory (default results/<timestamp>)")
    ap.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help=f"sessions at a time (default {DEFAULT_CONCURRENCY}; 1 for undisturbed timings)",
    )
    ap.add_argument(
        "--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two results directories"
    )
    ap.add_argument(
        "--user-edit-prob",
        type=float,
        default=USER_EDIT_PROB,
        metavar="P",
        help=f"chance the simulated user edits a file the next turn writes while thinking (default "
        f"{USER_EDIT_PROB:g}, an assumption; 0 turns harm off)",
    )
    ap.add_argument(
        "--accept-rule",
        default=None,
        choices=ACCEPT_RULES,
        help=f"when the simulated user takes a suggestion (default {DEFAULT_ACCEPT_RULE} on the simulator, "
        "else normalized; bench/user.py)",
    )
    ap.add_argument("--force", action="store_true", help="--compare runs made with different settings anyway")
    ap.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run session groups as Ray tasks: on a local Ray (no ADDRESS) or an existing cluster "
        "(ray://HOST:10001 or HOST:6379); the run directory is the same as a local run's",
    )
    ap.add_argument(
        "--ray-workers",
        type=int,
        default=None,
        metavar="N",
        help="with a local --ray: CPUs Ray may use, so groups run at once (default: all)",
    )
    ap.add_argument(
        "--spec-value",
        type=option_values.values,
        default=None,
        metavar="λ[,λ]",
        help="speculation policy: fork only when value × P(accept) × expected saving > (1 − P) × "
        "expected cost, value in dollars per second saved; 'inf' (the default) always forks; several "
        "values give one condition each (the cost–latency frontier)",
    )
    ap.add_argument(
        "--spec-candidates",
        type=option_values.ks,
        default=None,
        metavar="K[,K]",
        help="top-K speculation: suggest and fork up to K candidates (default 1); several values give "
        "one condition each",
    )
    ap.add_argument(
        "--spec-edits",
        default=None,
        metavar="stop|ask[,…]",
        help="a fork's edit the live path would ask about (default mode): 'stop' the fork before it (the "
        "default), or 'ask' on acceptance with its diff, as a command the live path would ask about is "
        "(the simulated user answers yes); 'stop,ask' gives one condition each (docs/speculation.md)",
    )
    ap.add_argument(
        "--spec-history",
        type=Path,
        default=None,
        metavar="FILE",
        help="a policy history (JSON, as `speculation.persist` keeps per project) every speculative "
        "session starts from, as a returning user's project would",
    )


def resolve_scenarios(names: list[str]) -> tuple[list[Scenario], list[Path]]:
    """Scenarios to run and the files the simulator serves (the chosen ones)."""
    bundled_paths = default_scenario_paths()
    bundled = {s.name: s for s in map(load_scenario, bundled_paths)}
    names = names or sorted(bundled)
    chosen: list[Scenario] = []
    for n in [x for name in names for x in _expand(name)]:
        if n in bundled:
            chosen.append(bundled[n])
        elif n.endswith((".yaml", ".yml")) and Path(n).is_file():
            chosen.append(load_scenario(n))
        else:
            raise ValueError(
                f"--scenario {n!r}: no such bundled scenario or YAML file "
                f"(bundled: {', '.join(sorted(bundled)) or 'none'})"
            )
    if not chosen:
        raise ValueError("no scenarios to run: bench/scenarios has no *.yaml and no --scenario was given")
    # Only the chosen scenarios are served: a session is answered from its own script even when another
    # scenario (an imported copy of a bundled one) has the same prompts.
    check_unique({s.source: s for s in chosen}.values())
    served = list(dict.fromkeys(Path(s.source) for s in chosen))
    return chosen, served


def _expand(name: str) -> list[str]:
    """A directory names the scenario files in it."""
    p = Path(name)
    if p.is_dir():
        found = sorted(str(x) for x in (*p.glob("*.yaml"), *p.glob("*.yml")))
        if not found:
            raise ValueError(f"--scenario {name}: no *.yaml in this directory")
        return found
    return [name]


def build_config(a: argparse.Namespace) -> RunConfig:
    scenarios, paths = resolve_scenarios([n for group in a.scenario for n in group])
    base: ThinkTime = resolve_think(a.think_time, scenarios, say=lambda s: print(s, file=sys.stderr))
    thinks: list[ThinkTime] = [base, *(FixedThink(x) for x in (a.sweep_think or []))]
    probs: list[float | None] = list(dict.fromkeys(a.accept_prob)) if a.accept_prob else [None]
    models = [m.strip() for m in (a.profile or DEFAULT_MODEL).split(",") if m.strip()]
    if MODEL_BACKENDS[a.model].on_simulator(a.base_url):
        from speculate.models.profiles import PROFILES, find_profile

        for m in models:
            if find_profile(m) is None:
                raise ValueError(f"--profile {m!r}: unknown (known: {', '.join(p.name for p in PROFILES)})")
    reps = a.reps if a.reps is not None else (1 if a.quick else DEFAULT_REPS)
    scale = a.time_scale if a.time_scale is not None else (QUICK_TIME_SCALE if a.quick else 1.0)
    conc = a.concurrency if a.concurrency is not None else DEFAULT_CONCURRENCY
    if reps < 1:
        raise ValueError(f"--reps {reps}: must be >= 1")
    if not scale > 0:
        raise ValueError(f"--time-scale {scale}: must be > 0")
    if conc < 1:
        raise ValueError(f"--concurrency {conc}: must be >= 1")
    if a.ray_workers is not None and (a.ray_workers < 1 or a.ray is None or a.ray):
        raise ValueError(f"--ray-workers {a.ray_workers}: a positive number, with a local --ray (no address)")
    if not 0 <= a.user_edit_prob <= 1:
        raise ValueError(f"--user-edit-prob {a.user_edit_prob:g}: must be between 0 and 1")
    values = list(dict.fromkeys(a.spec_value)) if a.spec_value else [None]
    ks = list(dict.fromkeys(a.spec_candidates)) if a.spec_candidates else [1]
    edits = list(dict.fromkeys(x.strip() for x in (a.spec_edits or "stop").split(",") if x.strip()))
    if not edits or set(edits) - {"stop", "ask"}:
        raise ValueError(f"--spec-edits {a.spec_edits!r}: expected stop, ask or both, comma-separated")
    typing = a.typing_cps or [TYPING_CHARS_PER_S]
    tabs = a.tab_s or [TAB_ACCEPT_S]
    sims = [x.strip() for x in a.sim.split(",") if x.strip()]
    if not sims or set(sims) - {"ideal", "realistic"}:
        raise ValueError(f"--sim {a.sim!r}: expected ideal, realistic or both, comma-separated")
    if any(x <= 0 for x in typing):
        raise ValueError("--typing-cps: must be > 0")
    if a.sensitivity:
        if (
            len(thinks) > 1
            or len(probs) > 1
            or len(models) > 1
            or len(typing) > 1
            or len(tabs) > 1
            or len(sims) > 1
            or len(values) > 1
            or len(ks) > 1
            or len(edits) > 1
        ):
            raise ValueError(
                "--sensitivity varies one assumption at a time from one base condition: give at most "
                "one value of --think-time, --accept-prob, --profile, --typing-cps, --tab-s, --sim, "
                "--spec-value, --spec-candidates and no --sweep-think"
            )
        conds = sensitivity_conditions(
            Condition(
                think=base,
                accept_prob=probs[0],
                model_name=models[0],
                typing_cps=typing[0],
                tab_s=tabs[0],
                sim=sims[0],
                spec_value=values[0],
                spec_k=ks[0],
                spec_edits=edits[0],  # type: ignore[arg-type]  # checked above: stop or ask
            )
        )
    else:
        conds = [
            Condition(
                think=t,
                accept_prob=p,
                model_name=m,
                typing_cps=c,
                tab_s=ts,
                sim=k,
                spec_value=v,
                spec_k=kk,
                spec_edits=e,  # type: ignore[arg-type]  # checked above: stop or ask
            )
            for t in thinks
            for p in probs
            for m in models
            for c in typing
            for ts in tabs
            for k in sims
            for v in values
            for kk in ks
            for e in edits
        ]
    scripted = MODEL_BACKENDS[a.model].on_simulator(a.base_url)
    rule = a.accept_rule or (DEFAULT_ACCEPT_RULE if scripted else "normalized")
    if rule == "outcome" and not scripted:
        raise ValueError(f"--accept-rule outcome reads the simulator's scripts: not with --model {a.model}")
    history = None
    if a.spec_history is not None:
        try:
            history = json.loads(a.spec_history.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"--spec-history {a.spec_history}: cannot be read as JSON: {e}") from None
    return RunConfig(
        scenarios=scenarios,
        conditions=conds,
        reps=reps,
        seed=a.seed,
        time_scale=scale,
        backend=a.model,
        base_url=a.base_url,
        scenario_paths=paths,
        concurrency=conc,
        mode=a.mode,
        overlay_backend=a.overlay_backend,
        record=a.record,
        user_edit_prob=a.user_edit_prob,
        spec_history=history,
        accept_rule=rule,
    )


# The sensitivity table's variations (each from the base condition, one at a time). Think time: the base
# median halved-ish and doubled; typing: the mean of 168,000 volunteers' transcription typing (52 wpm,
# Dhakal et al., CHI 2018) minus and plus one standard deviation (20 wpm), at 5 characters a word.
SENSITIVITY_THINK_MEDIANS = (2.0, 10.0)
SENSITIVITY_TYPING_CPS = (2.6, 6.0)
SENSITIVITY_TAB_S = 1.0  # reading the suggestion before taking it
SENSITIVITY_OTHER_PROFILE = {"claude-sonnet-4-6": "claude-haiku-4-5"}


def sensitivity_conditions(base: Condition) -> list[Condition]:
    """The base, then one condition per assumption varied (``--sensitivity``)."""
    sigma = base.think.sigma if isinstance(base.think, LogNormalThink) else LOGNORMAL_SIGMA
    out = [base]
    out += [
        replace(base, think=LogNormalThink(m, sigma, label=f"lognormal:{m:g},{sigma:g}"))
        for m in SENSITIVITY_THINK_MEDIANS
    ]
    other = SENSITIVITY_OTHER_PROFILE.get(base.model_name, "claude-sonnet-4-6")
    out.append(replace(base, model_name=other if other != base.model_name else "claude-haiku-4-5"))
    out += [replace(base, typing_cps=c) for c in SENSITIVITY_TYPING_CPS]
    out.append(replace(base, tab_s=SENSITIVITY_TAB_S))
    out.append(replace(base, sim="realistic" if base.sim == "ideal" else "ideal"))
    return out
