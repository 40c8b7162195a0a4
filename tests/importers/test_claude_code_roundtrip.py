"""The real Claude Code CLI runs bundled scenarios against the simulator and writes real transcripts; importing
them and replaying the scenarios (``speculate bench check``'s replay: speculate's agent and tools, the simulator
serving the imported scenario) reproduces the same prompts, tool calls and final files.

fix-pagination runs in Claude Code's interactive terminal UI (tmux), where a person's choices are recorded:
the driver takes the ghost suggestion with Tab on some turns and types the prompt on another, with known
pauses; the import must turn exactly the Tab presses into suggestions and the pauses into ``pause_s``. Other
scenarios run in ``-p`` mode (prompts recorded as ``sdk``: no suggestion). Skipped, with the reason, where
scripts/setup.sh could not install the CLI, or without tmux.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from bench.cc_interactive import Interactive
from bench.harness import resolve_toolchains, run_experiment
from bench.plan import Condition, RunConfig
from bench.toolchain import workspace_toolchain
from bench.user import FixedThink
from bench.workspace import CACHE_DIRS, manifest, prepare_workspace, tree_hash
from speculate.importers.claude_code import ImportConfig, import_sessions
from speculate.sim import SimServer, load_scenario
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario import Scenario, default_scenario_dir

pytestmark = pytest.mark.slow
TIME_SCALE = 0.05  # as tests/sim/test_claude_code.py: fast, and the prompt cache stays warm
GIT_ENV = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "Sim User"), ("EMAIL", "sim@example.invalid"))}  # fmt: skip
# fix-pagination, turn by turn: take the suggestion with Tab (or type the prompt), after this pause (s)
INTERACTIVE = [(False, 0.0), (True, 1.5), (True, 0.5), (False, 1.0), (True, 2.0)]
PRINT_MODE = ["replace-utils-module", "node-fix-overdue", "clean-stale-build"]


def claude_code(home: Path, scenario: Scenario) -> ClaudeCode:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    # The project's commands run with the toolchain the replay gives them, so both leave the same files
    path = workspace_toolchain(scenario.workspace).env["PATH"]
    return ClaudeCode(binary, home=home, extra_env={**GIT_ENV, "PATH": path})


def calls(scenario: Scenario) -> list[tuple[str, dict[str, Any]]]:
    """Every scripted call of the turns as (name, input), Claude Code's explicit defaults left out."""
    return [
        (c.name, {k: v for k, v in c.input.items() if not (k == "replace_all" and v is False)})
        for t in scenario.turns
        for s in t.steps
        for c in s.tools
    ]


def final_hash(root: Path) -> str:
    return tree_hash({k: v for k, v in manifest(root).items() if not (set(k.split("/")) & CACHE_DIRS)})


def replay(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The imported scenario replayed in the plain arm: turn records and session records."""
    sc = load_scenario(path)
    cfg = RunConfig(
        scenarios=[sc],
        conditions=[Condition(think=FixedThink(0))],
        reps=1,
        arms=("plain",),
        time_scale=0.02,
        scenario_paths=[path],
        concurrency=1,
        user_edit_prob=0.0,
        out=path.parent / "replay",
    )
    res = trio.run(lambda: run_experiment(cfg, path.parent / "replay", toolchains=resolve_toolchains([sc])))
    assert not res.failures, res.failures
    return res.turns, res.sessions


def check_import(original: Scenario, path: Path, project: Path) -> Scenario:
    imported = load_scenario(path)
    assert [t.prompt for t in imported.turns] == [t.prompt for t in original.turns]
    assert calls(imported) == calls(original)
    turns, (session,) = replay(path)
    assert [t["prompt"] for t in sorted(turns, key=lambda t: t["turn"])] == [t.prompt for t in original.turns]
    problems = [(t["turn"], t["error"]) for t in turns if t["error"] or t["fallback"]]
    assert not problems, problems  # every expectation met, every request answered from the script
    assert session["final_tree"] == final_hash(project), "the replay's final files differ from Claude Code's"
    return imported


@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_interactive_session_with_real_acceptance_imports_and_replays(tmp_path: Path) -> None:
    path = default_scenario_dir() / "fix-pagination.yaml"
    scenario = load_scenario(path)
    cc = claude_code(tmp_path / "home", scenario)
    project = prepare_workspace(scenario, tmp_path / "project")
    start = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True, check=True
    ).stdout.strip()
    shown: list[str | None] = []
    with SimServer([path], seed=0, time_scale=TIME_SCALE) as sim:
        ui = Interactive(cc, project, sim.base_url)
        try:
            ui.start()
            for turn, (take, pause) in zip(scenario.turns, INTERACTIVE, strict=True):
                shown.append(ui.turn(turn.prompt, take=take, pause_s=pause))
        finally:
            ui.close()
    assert shown[1:] == [t.prompt for t in scenario.turns[1:]]  # Claude Code showed the scripted suggestions
    res = import_sessions(
        ImportConfig(
            paths=(tmp_path / "home" / ".claude" / "projects",),
            out=tmp_path / "imported",
            repo=project,
            rev=start,
        )
    )
    (out,) = res.written
    imported = check_import(scenario, out, project)
    for i, turn in enumerate(imported.turns[:-1]):
        take = INTERACTIVE[i + 1][0]
        assert turn.suggestion == (imported.turns[i + 1].prompt if take else None), f"turn {i + 1}"
    for turn, (_, pause) in zip(imported.turns[1:], INTERACTIVE[1:], strict=True):
        assert turn.pause_s is not None and pause <= turn.pause_s <= pause + 20
    assert any(st.expect is not None and st.expect.matches for t in imported.turns for st in t.steps)


@pytest.mark.parametrize("name", PRINT_MODE)
def test_print_mode_sessions_import_and_replay(name: str, tmp_path: Path) -> None:
    path = default_scenario_dir() / f"{name}.yaml"
    scenario = load_scenario(path)
    cc = claude_code(tmp_path / "home", scenario)
    project = prepare_workspace(scenario, tmp_path / "project")
    start = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True, check=True
    ).stdout.strip()
    with SimServer([path], seed=0, time_scale=TIME_SCALE) as sim:
        for i, turn in enumerate(scenario.turns):
            run = cc.turn(turn.prompt, project=project, base_url=sim.base_url, resume=i > 0, timeout_s=120)
            assert run.returncode == 0, run.stderr[-2000:]
    projects = tmp_path / "home" / ".claude" / "projects"
    res = import_sessions(
        ImportConfig(paths=(projects,), out=tmp_path / "with-repo", repo=project, rev=start)
    )
    imported = check_import(scenario, res.written[0], project)
    assert all(t.suggestion is None for t in imported.turns)  # -p records no acceptance
    # Without --repo: the tree the transcript shows; file tools are still checked and still replay
    res = import_sessions(ImportConfig(paths=(projects,), out=tmp_path / "transcript-only"))
    alone = load_scenario(res.written[0])
    assert calls(alone) == calls(scenario)

    def at_start(rel: str) -> str:
        return subprocess.run(
            ["git", "show", f"{start}:{rel}"], cwd=project, capture_output=True, text=True, check=True
        ).stdout

    assert alone.files and all(at_start(rel) == content for rel, content in alone.files.items())
    turns, _ = replay(res.written[0])
    assert not [t["error"] for t in turns if t["error"]]
