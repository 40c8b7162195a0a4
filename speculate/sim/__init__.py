"""The embedded model simulator: a local Messages-API HTTP server with prompt-cache and latency models.

Owns the scenario format and its loader (:mod:`.scenario`, :mod:`.scenario_yaml`), how any client's
requests are read (:mod:`.clients`) and scripted steps rendered for the client's own tools (:mod:`.intents`,
:mod:`.schema`), request scripting (:mod:`.script`) and what the request's parameters do to the answer
(:mod:`.shaping`), record and replay (:mod:`.replay`), the prompt cache (:mod:`.cache`), the latency model and
model profiles (:mod:`.latency`, :mod:`.profiles`), request validation (:mod:`.validate`), the token
estimator (:mod:`.tokens`), faults and rate limits (:mod:`.faults`, :mod:`.ratelimit`) and the HTTP server
(:mod:`.handler`, :mod:`.server`). Start it with ``with SimServer(...) as sim:`` and point any
Messages-API client (the SDK, Claude Code) at ``sim.base_url``.
"""

from __future__ import annotations

from speculate.sim.cli import serve_main
from speculate.sim.clients import ClientConventions
from speculate.sim.engine import Engine, EngineStatistics
from speculate.sim.faults import FaultConfig
from speculate.sim.profiles import DEFAULT_MODEL, PROFILES, ModelProfile, Prices, find_profile
from speculate.sim.ratelimit import RateLimits
from speculate.sim.replay import Replay, TraceError, TraceWriter, canonical_key
from speculate.sim.scenario import Scenario, ScenarioError, Step, ToolCall, Turn
from speculate.sim.scenario_yaml import load_scenario, parse_scenario
from speculate.sim.script import FALLBACK_PREFIX
from speculate.sim.server import SimServer, SimStatistics

__all__ = [
    "DEFAULT_MODEL",
    "FALLBACK_PREFIX",
    "PROFILES",
    "ClientConventions",
    "Engine",
    "EngineStatistics",
    "FaultConfig",
    "ModelProfile",
    "Prices",
    "RateLimits",
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
