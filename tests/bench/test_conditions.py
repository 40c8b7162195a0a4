"""Conditions: the user's typing speed and Tab time, the simulator kind, and --sensitivity's one-at-a-time
variations, from the command line to the report's Sensitivity table."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import bench_main
from bench.plan import Condition
from bench.run_options import build_config, build_parser, sensitivity_conditions
from bench.tables import sensitivity_table
from bench.user import FixedThink, LogNormalThink


def config(*argv: str):  # type: ignore[no-untyped-def]
    return build_config(build_parser().parse_args(list(argv)))


def test_typing_tab_and_simulator_flags_make_one_condition_each() -> None:
    cfg = config("--typing-cps", "2.6,6", "--tab-s", "1", "--sim", "ideal,realistic", "--quick")
    assert [(c.typing_cps, c.tab_s, c.sim) for c in cfg.conditions] == [
        (2.6, 1.0, "ideal"),
        (2.6, 1.0, "realistic"),
        (6.0, 1.0, "ideal"),
        (6.0, 1.0, "realistic"),
    ]
    assert cfg.conditions[1].label == "lognormal natural claude-sonnet-4-6 typing:2.6cps tab:1s sim:realistic"
    assert Condition(think=FixedThink(2)).label == "fixed:2 natural claude-sonnet-4-6"  # defaults: no suffix


def test_sensitivity_varies_one_assumption_at_a_time_from_the_base() -> None:
    cfg = config("--sensitivity")
    base, *rest = cfg.conditions
    assert base == Condition(think=LogNormalThink())
    changed = [
        {
            k
            for k in ("think", "model_name", "typing_cps", "tab_s", "sim")
            if getattr(c, k) != getattr(base, k)
        }
        for c in rest
    ]
    assert changed == [
        {"think"},
        {"think"},
        {"model_name"},
        {"typing_cps"},
        {"typing_cps"},
        {"tab_s"},
        {"sim"},
    ]
    assert [c.think.median_s for c in rest[:2]] == [2.0, 10.0]  # type: ignore[attr-defined]
    assert rest[2].model_name == "claude-haiku-4-5" and rest[-1].sim == "realistic"
    haiku = sensitivity_conditions(Condition(think=LogNormalThink(), model_name="claude-haiku-4-5"))
    assert haiku[3].model_name == "claude-sonnet-4-6"


def test_sensitivity_refuses_a_second_value_of_what_it_varies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        bench_main(
            ["--sensitivity", "--profile", "claude-haiku-4-5,claude-sonnet-4-6", "--out", str(tmp_path / "x")]
        )
        == 2
    )
    assert "--sensitivity varies one assumption at a time" in capsys.readouterr().err
    assert bench_main(["--sim", "ideal,fancy", "--out", str(tmp_path / "x")]) == 2
    assert "--sim 'ideal,fancy'" in capsys.readouterr().err
    assert bench_main(["--typing-cps", "0", "--out", str(tmp_path / "x")]) == 2
    assert "--typing-cps: must be > 0" in capsys.readouterr().err


def test_the_sensitivity_table_names_what_each_row_changes() -> None:
    def block(median: float, model: str, sim: str, saving: float) -> dict:
        later = {"mean": saving, "ci95": [saving - 0.2, saving + 0.2]}
        return {
            "think_median_s": median,
            "model_name": model,
            "typing_cps": 5.0,
            "tab_s": 0.2,
            "sim": sim,
            "acceptance_rate": 0.8,
            "vs": {"suggest": {"saved_per_later_turn_s": later}, "plain": {"saved_per_later_turn_s": later}},
            "arms": {"plain": {"cost_per_turn_usd": 0.01}, "speculative": {"cost_per_turn_usd": 0.0125}},
            "fork_cost": {"miss_to_hit": 0.95},
        }

    s = {
        "conditions_detail": [
            block(5.0, "claude-sonnet-4-6", "ideal", 1.0),
            block(2.0, "claude-sonnet-4-6", "ideal", 0.4),
            block(5.0, "claude-sonnet-4-6", "realistic", 0.7),
        ]
    }
    md = "\n".join(sensitivity_table(s))
    assert "| base: think time median 5.0s, model profile claude-sonnet-4-6" in md
    assert "| think time median 2.0s | 80% | 0.40 [0.20, 0.60] |" in md
    assert (
        "| simulator realistic | 80% | 0.70 [0.50, 0.90] | 0.70 [0.50, 0.90] | $0.0125 (+25%) | 95% |" in md
    )
