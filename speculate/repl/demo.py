"""The simulator demo: a scenario's project set up in a directory, and its scripted prompts offered as
predictions from the first turn on, so a person can Tab through the session and watch speculation work."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from speculate.errors import SpeculateError
from speculate.sim.scenario import Scenario, Step, default_scenario_paths
from speculate.sim.scenario_yaml import load_scenario
from speculate.sim.script import next_turn
from speculate.tools import registry

DEFAULT_SCENARIO = "fix-pagination"
_GIT = re.compile(r"(^|[\s;&|(])git(\s|$)")


class DemoError(SpeculateError, ValueError):
    """A scenario or project directory the demo cannot use; the message names it."""


def find_scenario(name_or_path: str) -> Path:
    """A bundled scenario by name, or a ``.yaml`` file by path."""
    p = Path(name_or_path).expanduser()
    if p.suffix in (".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise DemoError(f"scenario file {name_or_path!r} does not exist")
        return p.resolve()
    bundled = {path.stem: path for path in default_scenario_paths()}
    for path in default_scenario_paths():  # names inside the files win over file names
        try:
            bundled[load_scenario(path).name] = path
        except ValueError:
            continue
    if name_or_path not in bundled:
        raise DemoError(
            f"no bundled scenario named {name_or_path!r}; choose one of: "
            + ", ".join(sorted({load_name(p) for p in bundled.values()}))
        )
    return bundled[name_or_path]


def load_name(path: Path) -> str:
    try:
        return load_scenario(path).name
    except ValueError:
        return path.stem


def needs_git(scenario: Scenario) -> bool:
    """Does any scripted Bash command run git (then the project must be a repository)?"""
    for turn in scenario.turns:
        steps: tuple[Step, ...] = turn.steps + (turn.suggestion_steps or ())
        for step in steps:
            for call in step.tools:
                if call.name in registry.SHELL_TOOLS and _GIT.search(str(call.input.get("command", ""))):
                    return True
    return False


def prepare_project(scenario: Scenario, dest: Path) -> Path:
    """Materialise the scenario's project into ``dest`` (new or empty), plus ``git init`` and a first
    commit when its script uses git."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DemoError(f"project directory {str(dest)!r} is not empty; the demo sets up a fresh one")
    root = scenario.materialize(dest)
    if needs_git(scenario):
        ident = ["-c", "user.name=speculate demo", "-c", "user.email=demo@speculate.invalid"]
        for cmd in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-q", "-m", "initial"]):
            subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)
    return root


@dataclass
class Demo:
    """Where a person is in the script: the next scripted prompt, advanced by what they send."""

    scenario: Scenario
    position: int = 0

    def next_prompt(self) -> str | None:
        turns = self.scenario.turns
        return turns[self.position].prompt if self.position < len(turns) else None

    def submitted(self, prompt: str) -> None:
        # The simulator's rule (speculate.sim.script): the next turn's prompt or the previous turn's
        # suggestion, else any later turn's prompt (resynchronising after a detour); a detour moves nothing.
        step = next_turn(self.scenario, self.position - 1, prompt, None)
        if step is not None:
            self.position = step[0] + 1

    def cleared(self) -> None:
        self.position = 0
