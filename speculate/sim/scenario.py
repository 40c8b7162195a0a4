"""Scenarios: what the simulated model says over a session, as data (format: docs/scenarios.md).

Read from YAML by :mod:`speculate.sim.scenario_yaml`; the engine, the bench and the REPL demo use these types.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculate import CHECKOUT, StrPath
from speculate.errors import SpeculateError

TOOL_CALL_MODES = ("api", "text")  # Scenario.tool_calls
ACCEPTANCE = ("scripted", "recorded", "unknown")  # Scenario.acceptance


class ScenarioError(SpeculateError, ValueError):
    """A scenario file is malformed; ``str()`` is ``file:line: reason``."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}:{line}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Expect:
    """What every tool result of a step must show (checked by the bench and ``sim check``, not the model)."""

    exit_code: int | None = None  # Bash: 0 unless the result says "Exit code N"
    contains: str | None = None
    matches: str | None = None  # a regular expression, searched


@dataclass(frozen=True)
class Step:
    """One assistant response: optional thinking, optional text, then tool calls (none ends the turn)."""

    text: str | None = None
    tools: tuple[ToolCall, ...] = ()
    thinking: str | None = None  # sent as a thinking block when the request runs with thinking
    expect: Expect | None = None  # about the results of ``tools``
    # ``expect:`` as a list: one per tool (None: that result unchecked), e.g. two Reads, one of them failing
    expects: tuple[Expect | None, ...] = ()

    def expect_at(self, j: int) -> Expect | None:
        """What the result of the ``j``-th tool call must show (None: nothing)."""
        if self.expects:
            return self.expects[j] if j < len(self.expects) else None
        return self.expect

    @property
    def checked(self) -> int:
        """How many of the step's tool results an expectation checks."""
        return sum(self.expect_at(j) is not None for j in range(len(self.tools)))


@dataclass(frozen=True)
class Candidate:
    """One suggestion the model may offer after a turn; ``steps`` run if it differs from the next prompt."""

    text: str | None  # None: no suggestion this time
    weight: float = 1.0
    steps: tuple[Step, ...] | None = None


@dataclass(frozen=True)
class Turn:
    prompt: str  # the user's intent for this turn
    steps: tuple[Step, ...]
    suggestion: str | None = None  # old format, or the heaviest candidate (for readers that show one)
    suggestion_steps: tuple[Step, ...] | None = None
    candidates: tuple[Candidate, ...] = ()  # ``suggestions:``; empty: the one ``suggestion``
    pause_s: float | None = None  # recorded: end of the previous answer to this prompt (imported sessions)

    @property
    def options(self) -> tuple[Candidate, ...]:
        return self.candidates or (Candidate(self.suggestion, 1.0, self.suggestion_steps),)


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: tuple[Turn, ...]
    description: str = ""
    workspace: Path | None = None  # resolved directory, or None for an empty project
    files: dict[str, str] = field(default_factory=dict)
    source: str = "<memory>"
    # api: tool_use blocks; text: the calls as <tool_use> JSON in the answer's text (speculate.models.text_tools)
    tool_calls: str = "api"
    # Where the turns' suggestions come from: scripted (written for the bench), recorded (an imported session
    # that recorded which prompts were taken from a suggestion) or unknown (one that did not: a null
    # suggestion there is not a typed prompt, and acceptance on it is unknown, not 0%).
    acceptance: str = "scripted"

    def materialize(self, dest: StrPath) -> Path:
        """Create the project for this scenario in ``dest`` (workspace copy plus ``files``)."""
        root = Path(dest)
        if self.workspace is not None:
            shutil.copytree(self.workspace, root, dirs_exist_ok=True)
        root.mkdir(parents=True, exist_ok=True)
        for rel, content in self.files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        return root


def default_scenario_dir() -> Path:
    """``bench/scenarios`` of the checkout this package runs from (where the bundled scenarios live), else
    their copy in an installed package (``speculate/sim/bundled``: setup.py ships them under that name,
    since the benchmark itself is not installed)."""
    checkout = CHECKOUT / "bench" / "scenarios"
    return checkout if checkout.is_dir() else Path(__file__).resolve().parent / "bundled"


def default_scenario_paths() -> list[Path]:
    directory = default_scenario_dir()
    return sorted(directory.glob("*.yaml")) if directory.is_dir() else []


def check_unique(scenarios: Iterable[Scenario]) -> None:
    """Scenario names must be unique across everything one simulator serves."""
    seen: dict[str, str] = {}
    for s in scenarios:
        if s.name in seen:
            raise ScenarioError(s.source, 1, f"scenario name {s.name!r} is also used by {seen[s.name]}")
        seen[s.name] = s.source
