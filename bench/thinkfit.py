"""``--think-time recorded`` and ``--think-time fit[:PATH...]``: think times from real sessions.

``recorded`` replays each imported turn's own think time (its recorded pause less the time entering the
prompt took, bench/user.py); ``fit`` fits a log-normal to the think times of the scenarios being run, and
``fit:PATH[,PATH...]`` to those of other scenarios (YAML files or directories of them) or Claude Code
transcripts (``.jsonl`` files or directories of them, read through speculate.importers), prints its
parameters and draws from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from bench.user import (
    LogNormalThink,
    RecordedThink,
    ThinkTime,
    fit_lognormal,
    parse_think,
    recorded_think_s,
    recorded_thinks,
)
from speculate.sim.scenario import Scenario, ScenarioError
from speculate.sim.scenario_yaml import load_scenario


def scenario_thinks(scenarios: Iterable[Scenario]) -> list[float]:
    return [x for s in scenarios for x in recorded_thinks(s) if x is not None]


def transcript_thinks(paths: Iterable[Path]) -> list[float]:
    """Think times in Claude Code transcripts, between consecutive prompts of each session."""
    from speculate.importers.files import Skipped, discover, load
    from speculate.importers.sessions import ACCEPTED, Counts, sessions

    counts, skipped = Counts(), Skipped()  # an unreadable file or record is left out of the fit
    out: list[float] = []
    for f in discover(paths):
        records = load(f, counts, skipped)
        for s in sessions(f, records, counts) if records is not None else []:
            for prev, turn in zip(s.turns, s.turns[1:], strict=False):
                if prev.end is not None and turn.at is not None:
                    pause = (turn.at - prev.end).total_seconds()
                    out.append(recorded_think_s(pause, turn.prompt, tab=turn.source == ACCEPTED))
    return out


def path_thinks(spec: str) -> list[float]:
    """Think times from ``PATH[,PATH...]``: scenario YAML or transcripts, files or directories."""
    yamls: list[Path] = []
    transcripts: list[Path] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        p = Path(part)
        if p.is_dir():
            yamls += sorted(p.glob("*.yaml"))
            if any(p.glob("*.jsonl")) or any(p.glob("*/*.jsonl")):
                transcripts.append(p)
        elif p.suffix in (".yaml", ".yml") and p.is_file():
            yamls.append(p)
        elif p.is_file():
            transcripts.append(p)
        else:
            raise ValueError(f"--think-time fit:{part}: no such file or directory")
    try:
        scenarios = [load_scenario(y) for y in yamls]
    except ScenarioError as e:
        raise ValueError(f"--think-time fit: {e}") from None
    from speculate.importers.records import TranscriptError

    try:
        return scenario_thinks(scenarios) + (transcript_thinks(transcripts) if transcripts else [])
    except TranscriptError as e:
        raise ValueError(f"--think-time fit: {e}") from None


def resolve_think(spec: str, scenarios: list[Scenario], *, say: Callable[[str], None]) -> ThinkTime:
    """The think-time model ``--think-time`` names; ``say`` prints what recorded and fitted models use."""
    kind, _, arg = spec.partition(":")
    if spec == "recorded":
        total = sum(len(s.turns) - 1 for s in scenarios)
        n = len(scenario_thinks(scenarios))
        if n == 0:
            raise ValueError(
                "--think-time recorded: no scenario records pauses (pause_s); import sessions "
                "with speculate import claude-code (docs/transcripts.md)"
            )
        model = RecordedThink()
        say(
            f"think time: recorded for {n} of {total} later turns; the others drawn from {model.fallback.label}"
        )
        return model
    if kind == "fit":
        samples = path_thinks(arg) if arg else scenario_thinks(scenarios)
        fit = fit_lognormal(samples)
        think: LogNormalThink = fit.think()
        say(
            f"think time fit: log-normal mu={fit.mu:.3f} sigma={fit.sigma:.3f} (median {fit.median_s:.2f} s) "
            f"from n={fit.n} think times"
            + (f", {fit.left_out} of 0 s left out" if fit.left_out else "")
            + f"; draws capped at {think.cap_s:g} s"
        )
        return think
    return parse_think(spec)
