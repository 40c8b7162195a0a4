"""The simulated user: think-time models, typing time, and the prompt plan both arms share."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from bench import stats
from bench.user import (
    ENTER_S,
    TYPING_CHARS_PER_S,
    EmpiricalThink,
    LogNormalThink,
    parse_think,
    plan_turns,
    typing_s,
)

PROMPTS = ["first", "second", "third", "fourth"]
SUGG = ["second", "something else", None, None]  # suggestion after each turn


def test_lognormal_default_has_the_documented_median_and_cap() -> None:
    rng = random.Random(0)
    draws = [LogNormalThink().draw(rng) for _ in range(20000)]
    assert stats.median(draws) == pytest.approx(5.0, rel=0.04)
    assert max(draws) <= 60.0
    # sigma 0.9: p90 = 5 * exp(1.2816 * 0.9)
    assert stats.percentile(draws, 90) == pytest.approx(5 * math.exp(1.2816 * 0.9), rel=0.06)


def test_parse_think_specs_and_errors_name_the_input(tmp_path: Path) -> None:
    assert parse_think("fixed:2.5").draw(random.Random()) == 2.5
    assert parse_think("fixed:0").label == "fixed:0"
    assert parse_think("lognormal").label == "lognormal"
    assert isinstance(parse_think("lognormal:3,0.5"), LogNormalThink)
    f = tmp_path / "think.txt"
    f.write_text("# seconds\n1.5\n\n4  # slow one\n")
    emp = parse_think(f"file:{f}")
    assert isinstance(emp, EmpiricalThink) and emp.samples == (1.5, 4.0)
    assert {emp.draw(random.Random(i)) for i in range(50)} == {1.5, 4.0}
    with pytest.raises(ValueError, match=r"fixed:-1"):
        parse_think("fixed:-1")
    with pytest.raises(ValueError, match=r"'gamma'"):
        parse_think("gamma")
    bad = tmp_path / "bad.txt"
    bad.write_text("1\nfast\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: not a number: 'fast'"):
        parse_think(f"file:{bad}")
    with pytest.raises(ValueError, match=r"missing.txt: cannot read"):
        parse_think(f"file:{tmp_path / 'missing.txt'}")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ValueError, match="no think times"):
        parse_think(f"file:{tmp_path / 'empty.txt'}")


def test_typing_time_is_chars_over_speed_plus_enter() -> None:
    assert typing_s("x" * 50) == pytest.approx(50 / TYPING_CHARS_PER_S + ENTER_S)


def test_plan_sends_the_scenario_prompts_and_is_reproducible() -> None:
    kw = {"think": LogNormalThink(), "seed": 3, "scenario": "s", "rep": 0}
    plan = plan_turns(PROMPTS, SUGG, **kw)  # type: ignore[arg-type]
    assert [p.text for p in plan] == PROMPTS
    assert plan[0].think_s == 0.0 and all(p.think_s > 0 for p in plan[1:])
    assert plan == plan_turns(PROMPTS, SUGG, **kw)  # type: ignore[arg-type]  # both arms: same draws
    other = plan_turns(PROMPTS, SUGG, **{**kw, "rep": 1})  # type: ignore[arg-type]
    assert [p.think_s for p in other] != [p.think_s for p in plan]
    assert [p.scripted_suggestion for p in plan] == [None, "second", "something else", None]
