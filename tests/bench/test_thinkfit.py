"""Think times from real sessions: ``--think-time recorded`` (each imported turn's own) and ``--think-time fit``
(a log-normal fitted to them); and ``--scenarios DIR`` serving only the chosen scenarios."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import yaml

from bench.run_options import build_config, build_parser, resolve_scenarios
from bench.thinkfit import resolve_think
from bench.user import (
    TAB_ACCEPT_S,
    LogNormalThink,
    RecordedThink,
    fit_lognormal,
    plan_turns,
    recorded_thinks,
    typing_s,
)
from speculate.sim.scenario import default_scenario_dir
from speculate.sim.scenario_yaml import parse_scenario
from tests.importers.cc_records import Transcript, text

SCENARIO = """
name: recorded
turns:
  - prompt: "one"
    steps: [{text: "1"}]
    suggestion: "two"
  - prompt: "two"
    pause_s: 6.0
    steps: [{text: "2"}]
  - prompt: "three, typed"
    pause_s: 9.0
    steps: [{text: "3"}]
  - prompt: "four"
    steps: [{text: "4"}]
"""


def test_recorded_think_is_the_pause_less_entering_the_prompt_as_the_user_did() -> None:
    sc = parse_scenario(SCENARIO)
    thinks = recorded_thinks(sc)
    assert thinks == [None, 6.0 - TAB_ACCEPT_S, 9.0 - typing_s("three, typed"), None]
    plan = plan_turns(
        [t.prompt for t in sc.turns],
        ["two", None, None, None],
        think=RecordedThink(),
        seed=1,
        scenario=sc.name,
        rep=0,
        recorded=thinks,
    )
    assert [p.think_s for p in plan[:3]] == [0.0, 6.0 - TAB_ACCEPT_S, 9.0 - typing_s("three, typed")]
    assert plan[3].think_s > 0  # no record: drawn from the log-normal
    drawn = plan_turns(
        [t.prompt for t in sc.turns],
        ["two", None, None, None],
        think=LogNormalThink(),
        seed=1,
        scenario=sc.name,
        rep=0,
        recorded=thinks,
    )
    assert drawn[1].think_s != plan[1].think_s and drawn[3].think_s == plan[3].think_s  # same RNG stream


def test_pause_s_is_validated() -> None:
    with pytest.raises(ValueError, match=r"turns\[0\].pause_s"):
        parse_scenario(SCENARIO.replace('  - prompt: "one"\n', '  - prompt: "one"\n    pause_s: 1\n'))
    with pytest.raises(ValueError, match=r"turns\[1\].pause_s must be seconds >= 0"):
        parse_scenario(SCENARIO.replace("pause_s: 6.0", "pause_s: -1"))


def test_fit_is_the_maximum_likelihood_lognormal() -> None:
    fit = fit_lognormal([math.e, math.e**2, math.e**3, 0.0])
    assert fit.mu == pytest.approx(2.0) and fit.sigma == pytest.approx(math.sqrt(2 / 3))
    assert fit.median_s == pytest.approx(math.e**2) and fit.n == 3 and fit.left_out == 1
    assert "mu=2.000" in fit.think().label and "n=3" in fit.think().label
    with pytest.raises(ValueError, match="at least 2"):
        fit_lognormal([0.0, 3.0])


def test_resolve_think_reports_and_refuses(tmp_path: Path) -> None:
    said: list[str] = []
    sc = parse_scenario(SCENARIO)
    assert isinstance(resolve_think("recorded", [sc], say=said.append), RecordedThink)
    assert said[-1].startswith("think time: recorded for 2 of 3 later turns")
    model = resolve_think("fit", [sc], say=said.append)
    assert isinstance(model, LogNormalThink) and said[-1].startswith("think time fit: log-normal mu=")
    bundled = parse_scenario(
        (default_scenario_dir() / "fix-pagination.yaml").read_text(), base_dir=default_scenario_dir()
    )
    with pytest.raises(ValueError, match="no scenario records pauses"):
        resolve_think("recorded", [bundled], say=said.append)
    # from transcripts: pauses between prompts, less the modelled typing
    t = Transcript()
    for i, gap in enumerate((4.0, 10.0, 20.0)):
        t.at(gap).prompt(f"p{i}")
        t.at(1).message(f"m{i}", text("ok"))
    t.write(tmp_path / "tx" / "s.jsonl")
    model = resolve_think(f"fit:{tmp_path / 'tx'}", [], say=said.append)
    expected = fit_lognormal([10.0 - typing_s("p1"), 20.0 - typing_s("p2")])
    assert isinstance(model, LogNormalThink) and model.median_s == pytest.approx(expected.median_s)
    with pytest.raises(ValueError, match="no such file"):
        resolve_think(f"fit:{tmp_path / 'nope'}", [], say=said.append)


def test_a_directory_of_scenarios_is_served_alone(tmp_path: Path) -> None:
    """An imported copy of a bundled scenario has the same prompts; the simulator answers a session from the
    first scenario that follows its prompts, so only the chosen ones may be served (the bundled ones were
    served first before)."""
    copy = yaml.safe_load((default_scenario_dir() / "fix-pagination.yaml").read_text())
    copy["name"] = "cc-fix-pagination-copy"
    copy["turns"][0]["steps"][-1]["text"] = "A different answer."
    d = tmp_path / "imported"
    d.mkdir()
    shutil.copytree(default_scenario_dir() / "workspaces", d / "workspaces")
    (d / "copy.yaml").write_text(yaml.safe_dump(copy, sort_keys=False))
    chosen, served = resolve_scenarios([str(d)])
    assert [s.name for s in chosen] == ["cc-fix-pagination-copy"]
    assert served == [d / "copy.yaml"]
    cfg = build_config(build_parser().parse_args(["--scenarios", str(d), "--think-time", "fixed:1"]))
    assert cfg.scenario_paths == [d / "copy.yaml"]
    (d / "dup.yaml").write_text(yaml.safe_dump(copy, sort_keys=False))
    with pytest.raises(ValueError, match="also used by"):  # one name twice cannot be served
        resolve_scenarios([str(d)])
