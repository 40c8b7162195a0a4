"""The embedded model simulator: a local Messages-API HTTP server with prompt-cache and latency models.

Owns the scenario format and its loader (:mod:`.scenario`), request scripting (:mod:`.script`), record and
replay (:mod:`.replay`), the prompt cache (:mod:`.cache`), the latency model and model profiles
(:mod:`.latency`, :mod:`.profiles`), the token estimator (:mod:`.tokens`) and the HTTP server
(:mod:`.server`). Start it with ``with SimServer(...) as sim:`` and point the SDK at ``sim.base_url``.
"""

from __future__ import annotations

from speculate.sim.cli import serve_main
from speculate.sim.engine import Engine, EngineStatistics
from speculate.sim.profiles import DEFAULT_MODEL, PROFILES, ModelProfile, Prices, find_profile
from speculate.sim.replay import Replay, TraceError, TraceWriter, canonical_key
from speculate.sim.scenario import (
    Scenario,
    ScenarioError,
    Step,
    ToolCall,
    Turn,
    load_scenario,
    parse_scenario,
)
from speculate.sim.script import FALLBACK_PREFIX
from speculate.sim.server import FaultConfig, SimServer, SimStatistics

__all__ = [
    "DEFAULT_MODEL",
    "FALLBACK_PREFIX",
    "PROFILES",
    "Engine",
    "EngineStatistics",
    "FaultConfig",
    "ModelProfile",
    "Prices",
    "Replay",
    "Scenario",
    "ScenarioError",
    "SimServer",
    "SimStatistics",
    "Step",
    "ToolCall",
    "TraceError",
    "TraceWriter",
    "Turn",
    "canonical_key",
    "find_profile",
    "load_scenario",
    "parse_scenario",
    "serve_main",
]
