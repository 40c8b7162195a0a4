"""The corpus generator (fast, no agent runs): enough calls, unique keys, every category, and calls the
simulator accepts (each configuration's scenario parses and validates against the tools' schemas)."""

from __future__ import annotations

from pathlib import Path

from speculate.sim.scenario_yaml import parse_scenario

from .cases import CATEGORIES
from .corpus import calls, configurations
from .layout import scenario
from .test_differential import INTENDED_STRICTER


def test_the_corpus_has_500_calls_with_unique_keys_in_every_category() -> None:
    keys = [key for key, _, _ in calls()]
    assert len(keys) >= 500
    assert len(set(keys)) == len(keys)
    assert {call.category for _, _, call in calls()} == set(CATEGORIES)
    # Each configuration is one scripted turn of a reasonable length, all of one category.
    for cfg in configurations():
        assert 3 <= len(cfg.calls) <= 80, cfg.name
        assert {c.category for c in cfg.calls} == {cfg.category}, cfg.name


def test_every_listed_stricter_call_is_in_the_corpus() -> None:
    assert INTENDED_STRICTER.keys() <= {key for key, _, _ in calls()}


def test_every_configuration_is_a_valid_scenario() -> None:
    for cfg in configurations():
        s = parse_scenario(scenario(cfg, Path("/scratch")), source=cfg.name)
        assert len(s.turns[0].steps) == len(cfg.calls) + 1
