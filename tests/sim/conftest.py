"""Fixtures for the simulator tests: a running SimServer on the tiny scenario and SDK clients for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from speculate.prompts import system_prompt
from speculate.sim import SimServer

FIXTURES = Path(__file__).parent / "fixtures"
TINY = FIXTURES / "tiny.yaml"
MODEL = "claude-sonnet-4-6"  # claude-sonnet-4-5 makes anthropic 2.14 emit a DeprecationWarning
ROOT = Path("/work/project")
SYSTEM = system_prompt(ROOT)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer([TINY], seed=7, time_scale=0.001) as server:
        yield server


@pytest.fixture
def client(sim: SimServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=sim.base_url, api_key="sim", max_retries=0) as c:
        yield c
