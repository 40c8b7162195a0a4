"""Engine tests: sessions on the embedded simulator over small inline scenarios."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.workspace import manifest
from bench.workspace import tree_hash as canary_hash
from speculate.models.anthropic import AnthropicModel
from speculate.session import Session, SessionConfig, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer

LONG = " ".join(["The fork keeps talking so that it is still streaming when the user decides."] * 30)

SCENARIO = f"""
name: engine-test
description: exercises every speculation state and boundary
files:
  a.txt: "alpha\\n"
  b.txt: "beta\\n"
turns:
  - prompt: "look at a"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/a.txt"}}
      - text: "a.txt holds alpha."
    suggestion: "change alpha to gamma"
  - prompt: "change alpha to gamma"
    steps:
      - tools:
          - Edit: {{file_path: "{{root}}/a.txt", old_string: "alpha", new_string: "gamma"}}
      - text: "Changed a.txt."
    suggestion: "fetch the docs"
  - prompt: "fetch the docs"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/b.txt"}}
      - tools:
          - Bash: {{command: "curl -s https://example.invalid/docs"}}
      - text: "Fetched."
    suggestion: "ask the web"
  - prompt: "ask the web"
    steps:
      - tools:
          - WebSearch: {{query: "alpha gamma"}}
      - text: "Searched."
    suggestion: "write a long essay"
  - prompt: "write a long essay"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/b.txt"}}
      - text: "{LONG}"
        tools:
          - Write: {{file_path: "{{root}}/essay.txt", content: "essay\\n"}}
      - text: "Written."
    suggestion: null
"""


SLEEPER = """
name: engine-sleeper
description: a speculation that is aborted while its sandboxed command runs
turns:
  - prompt: "start sleeping"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "Ready."
    suggestion: "sleep in the sandbox"
  - prompt: "sleep in the sandbox"
    steps:
      - tools:
          - Bash: {command: "touch early.txt && sleep 30 && touch late.txt"}
      - text: "Slept."
    suggestion: null
"""


# Speculative Bash under the sandbox: read-only (runs nowhere without a sandbox), writing past the upper
# layer's bound, and sleeping long enough for its FUSE server to be killed under it.
SANDBOXED = """
name: engine-sandboxed
description: speculative Bash commands that meet the sandbox's rules
turns:
  - prompt: "show the files for {next}"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a.txt is there."
    suggestion: "{next}"
  - prompt: "{next}"
    steps:
      - tools:
          - Bash: {command: "{command}"}
      - text: "Done."
    suggestion: null
"""
# A fork whose Write goes past the upper layer's bound (the file tools write the same bounded layer).
WRITER = """
name: engine-writer
description: a speculation whose Write does not fit in its upper layer
turns:
  - prompt: "show the files for write a big file"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "a.txt is there."
    suggestion: "write a big file"
  - prompt: "write a big file"
    steps:
      - tools:
          - Write: {file_path: "{root}/big.txt", content: "%s"}
      - text: "Written."
    suggestion: null
""" % ("x" * 20_000)
SANDBOXED_COMMANDS = {
    "cat a with bash": "cat a.txt",
    "write big files": "; ".join(f"head -c 3000000 /dev/zero > big{i}; sleep 0.2" for i in range(1, 9)),
    "sleep then read": "sleep 1.5; cat a.txt; echo read-done",
}


def tree_hash(root: Path) -> str:
    """The benchmark's canary hash of a real tree (paths, modes, contents, links, empty dirs)."""
    return canary_hash(manifest(root))


def make_project(tmp: Path) -> Path:
    root = tmp / "proj"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("beta\n")
    return root


@asynccontextmanager
async def engine_session(
    root: Path, *, time_scale: float = 0.02, ask: Any = None, events: list | None = None, **cfg: Any
) -> AsyncIterator[tuple[Session, SimServer]]:
    sink: Callable[[Any], None] = events.append if events is not None else (lambda e: None)
    extra = [
        parse_scenario(
            SANDBOXED.replace("engine-sandboxed", f"engine-sandboxed-{i}")
            .replace("{next}", nxt)
            .replace("{command}", cmd)
        )
        for i, (nxt, cmd) in enumerate(SANDBOXED_COMMANDS.items())
    ]
    with SimServer(
        [parse_scenario(SCENARIO), parse_scenario(SLEEPER), parse_scenario(WRITER), *extra],
        time_scale=time_scale,
    ) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(project=root, model=model, events_path=root.parent / "events.jsonl", **cfg)
            async with open_session(config, ask=ask, on_event=sink) as s:
                yield s, sim
