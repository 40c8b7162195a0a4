"""Figures for the claude-cli backend: turn latency and cache-read share against the API backend, on the same
three-turn scenario served by the simulator (the API backend gets tool_use blocks, the CLI <tool_use> text).

    .venv/bin/python -m bench.claude_cli_figures [--time-scale 1.0]

Speculation off: one normal turn after another, so both backends make the same requests. Needs the CLI that
scripts/setup.sh installs.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import trio

from bench.errors import BenchRunFailed
from speculate.models.anthropic import AnthropicModel
from speculate.models.claude_cli import ClaudeCliModel
from speculate.session import SessionConfig, open_session
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer

SCENARIO = """
name: cli-figures
tool_calls: {mode}
turns:
  - prompt: "look at a"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/a.txt"}}
      - text: "a.txt holds alpha."
  - prompt: "look at b"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/b.txt"}}
      - text: "b.txt holds beta."
  - prompt: "look at c"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/c.txt"}}
      - text: "c.txt holds gamma."
"""
PROMPTS = ("look at a", "look at b", "look at c")


async def run(label: str, cli: bool, tmp: Path, time_scale: float) -> list[dict[str, Any]]:
    """The three turns on the API client (``cli`` False) or the ``claude`` CLI, each on its own simulator."""
    root = tmp / label / "proj"
    root.mkdir(parents=True)
    for name, text in (("a.txt", "alpha\n"), ("b.txt", "beta\n"), ("c.txt", "gamma\n")):
        (root / name).write_text(text)
    mode = "text" if cli else "api"
    rows: list[dict[str, Any]] = []
    with SimServer([parse_scenario(SCENARIO.format(mode=mode))], time_scale=time_scale) as sim:
        if cli:
            binary = ClaudeCode.locate()
            if isinstance(binary, str):
                raise SystemExit(binary)
            (tmp / "home").mkdir(exist_ok=True)
            (tmp / "cwd").mkdir(exist_ok=True)
            model: Any = ClaudeCliModel(
                binary=binary, env=ClaudeCode(binary, home=tmp / "home").env(sim.base_url), cwd=tmp / "cwd"
            )
        else:
            model = AnthropicModel(base_url=sim.base_url, api_key="sim")
        async with model, open_session(SessionConfig(project=root, model=model, speculate=False)) as s:
            for prompt in PROMPTS:
                out = await s.submit(prompt)
                if out.result is None or out.error:
                    raise BenchRunFailed(f"turn {len(rows) + 1} ({prompt!r}) failed: {out}")
                u = out.result.usage
                rows.append(
                    {
                        "turn": len(rows) + 1,
                        "latency_s": out.latency_s,
                        "cache_read_share": u.cache_read_input_tokens / u.total_input,
                        "input": u.total_input,
                    }
                )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-scale", type=float, default=1.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for label, cli in (("anthropic", False), ("claude-cli", True)):
            for r in trio.run(run, label, cli, Path(d), a.time_scale):
                print(
                    f"{label:10s} turn {r['turn']}: {r['latency_s']:6.2f} s, cache-read share "
                    f"{r['cache_read_share']:.2f} of {r['input']} input tokens"
                )


if __name__ == "__main__":
    main()
