"""What the two-part system prompt buys: the cache-read share of a new session's first request when a
previous session ran a few (simulated) minutes earlier, before and after.

Run: ``.venv/bin/python -m bench.micro.system_prompt_bench [--gap-min 3] [--time-scale 0.001]``.

Two sessions (the agent loop, the real SDK) run one after the other against one embedded simulator, whose
prompt cache honours TTLs on a time-scaled clock; between them ``--gap-min`` simulated minutes pass. The
first request of the second session (which asks another question) is measured: cache_read / (input +
cache_creation + cache_read).
Layouts: ``main`` (the single-part prompt before this change: two lines and the working directory, tools
and system each with a breakpoint), ``one block`` (this change's text, static and dynamic, sent as one
system block), ``two parts`` (this change: the static block and the dynamic block, a breakpoint on each).
Cases for the second session: the same project unchanged; the same project after an edit to CLAUDE.md;
another project.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from speculate.agent import Agent
from speculate.fs import LocalFS, LocalShell
from speculate.instructions import load_instructions
from speculate.models.anthropic import AnthropicModel
from speculate.models.base import CacheKey
from speculate.prompts import system_parts
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.authorize import MainAuthorizer
from speculate.tools import default_tools
from speculate.tools.base import ToolContext

# The system prompt on main before the two-part change (speculate/prompts.py at 92a7891).
MAIN_TEMPLATE = """You are a coding agent working in a software project on the user's machine.
Use the tools to read, search, edit and run code. Keep answers short and concrete.
Working directory: {root}
"""
TODAY = datetime.date(2026, 11, 26)
SCENARIO = """
name: prompt-bench-{n}
description: one turn that reads a file
turns:
  - prompt: "{prompt}"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/README.md"}}
      - text: "It keeps an inventory."
    suggestion: null
"""
# Each session opens with its own question: only the prefix before the first message can be shared.
PROMPTS = ("what does this project do?", "where is the command line defined?")
# A CLAUDE.md of a typical size (~4 KB, ~1000 tokens).
CLAUDE_MD = "# Conventions\n" + "".join(
    f"- Rule {i}: keep module {i} small, typed, tested with pytest, and formatted with ruff.\n"
    for i in range(50)
)


def project(base: Path, name: str) -> Path:
    root = base / name
    root.mkdir()
    (root / "README.md").write_text(f"# {name}\nAn inventory tool.\n")
    (root / "CLAUDE.md").write_text(CLAUDE_MD.replace("Conventions", f"Conventions of {name}"))
    return root


def key(layout: str, root: Path) -> CacheKey:
    tools = [t.schema() for t in default_tools()]
    if layout == "main":
        system: Any = MAIN_TEMPLATE.format(root=root)
    else:
        parts = system_parts(root, instructions=load_instructions(root).render(), today=TODAY)
        system = "\n".join(parts) if layout == "one block" else parts
    return CacheKey.build(model="claude-sonnet-4-6", system=system, tools=tools)


async def first_request_share(
    layout: str, case: str, *, gap_min: float, time_scale: float
) -> tuple[float, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        a = project(Path(tmp), "shop")
        b = a if case != "other project" else project(Path(tmp), "warehouse")
        scenarios = [parse_scenario(SCENARIO.format(n=n, prompt=p)) for n, p in enumerate(PROMPTS)]
        with SimServer(scenarios, time_scale=time_scale) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x") as model:
                await run_session(model, layout, a, PROMPTS[0])
                await trio.sleep(gap_min * 60 * time_scale)
                if case == "instructions edited":
                    (a / "CLAUDE.md").write_text(CLAUDE_MD + "- Also: no print debugging.\n")
                result = await run_session(model, layout, b, PROMPTS[1])
    u = result.responses[0].usage
    return u.cache_read_input_tokens / u.total_input, u


async def run_session(model: AnthropicModel, layout: str, root: Path, prompt: str) -> Any:
    tools = default_tools()
    agent = Agent(
        model=model,
        key=key(layout, root),
        tools=tools,
        ctx=ToolContext(fs=LocalFS(root), shell=LocalShell(root), spill_dir=root.parent / "spill"),
        authorizer=MainAuthorizer(mode="acceptEdits", allow=[], deny=[], ask=None, root=root),
    )
    return await agent.run(prompt)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gap-min", type=float, default=3.0, help="simulated minutes between the two sessions")
    p.add_argument("--time-scale", type=float, default=0.001, help="simulator time scale (0.001: 1000x)")
    args = p.parse_args(argv)
    layouts = ("main", "one block", "two parts")
    cases = ("same project", "instructions edited", "other project")
    print(
        f"cache-read share of the second session's first request, {args.gap_min:g} simulated minutes "
        "after the first (read / all input tokens)\n"
    )
    print(f"| layout | {' | '.join(cases)} |\n|---|{'---|' * len(cases)}")
    t0 = time.perf_counter()
    for layout in layouts:
        cells = []
        for case in cases:
            share, u = trio.run(
                functools.partial(
                    first_request_share, layout, case, gap_min=args.gap_min, time_scale=args.time_scale
                )
            )
            cells.append(f"{share:.0%} ({u.cache_read_input_tokens}/{u.total_input})")
        print(f"| {layout} | {' | '.join(cells)} |")
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
