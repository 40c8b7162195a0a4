"""Record a session against an Anthropic-compatible server, then serve the trace from the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from speculate.backends import BackendConfig, open_model
from speculate.session import SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer

from .conftest import write_tree
from .test_loop import SCENARIO


def test_recorded_trace_replays_the_same_answers(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    root = write_tree(tmp_path / "proj", {"a.txt": "alpha\n", "b.txt": "beta\n"})

    async def session(cfg: BackendConfig, project: Path) -> list[str]:
        async with open_model(cfg) as model:
            async with open_session(SessionConfig(project=project, model=model, speculate=False)) as s:
                return [(await s.submit(p)).text for p in ("read both files", "change alpha to gamma")]

    async def main() -> None:
        # "Real" side: the anthropic backend pointed at a compatible server (here: the simulator).
        with SimServer([parse_scenario(SCENARIO)], time_scale=0.01) as live:
            recorded = await session(
                BackendConfig(backend="anthropic", base_url=live.base_url, api_key="x", record=trace), root
            )
        lines = [json.loads(x) for x in trace.read_text().splitlines()]
        assert len(lines) == 4 and all(x["timings"]["total_s"] > 0 for x in lines)
        # Offline side: only the trace, no scenario. The project is restored at the same path, so the
        # requests (system prompt included) are byte-identical to the recorded ones.
        root2 = write_tree(tmp_path / "proj", {"a.txt": "alpha\n", "b.txt": "beta\n"})
        replayed = await session(
            BackendConfig(backend="sim", scenarios=[], trace=trace, time_scale=0.01), root2
        )
        assert replayed == recorded == ["a says alpha, b says beta.", "Done."]

    trio.run(main)
