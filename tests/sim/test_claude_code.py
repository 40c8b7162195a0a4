"""The real Claude Code CLI runs the bundled scenarios end to end against the simulator over HTTP on 127.0.0.1.

Stock settings (its default model, its own tools, its prompt wrapping and suggestion wording). In
fix-pagination every next prompt is the suggestion Claude Code itself emitted (the user pressing Tab); Claude
Code executes the tools: the files change as scripted and the project's tests really run. The other bundled
scenarios run unchanged, each turn typed as scripted. Skipped, with the reason, where scripts/setup.sh could
not install the CLI from a registry.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from speculate.repl.demo import prepare_project
from speculate.sim import SimServer, load_scenario
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.draw import draw_suggestion
from speculate.sim.scenario import Scenario, default_scenario_dir, default_scenario_paths

SCENARIO = default_scenario_dir() / "fix-pagination.yaml"
OTHERS = [p for p in default_scenario_paths() if p != SCENARIO]
RUN_TIMEOUT_S = 120  # per turn; a whole session takes seconds at this time scale
# Fast, but a 5-minute cache TTL still lasts 15 s: at 0.01 a pytest run slowed by a busy machine outlived it,
# and Claude Code, as designed, suggests nothing after a turn that found its cache cold.
TIME_SCALE = 0.05
# A commit needs an identity; the scratch HOME has no git configuration.
GIT_ENV = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "Sim User"), ("EMAIL", "sim@example.invalid"))}  # fmt: skip


def claude_code(home: Path) -> ClaudeCode:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    return ClaudeCode(binary, home=home, extra_env=GIT_ENV)


def scripted_tree(scenario: Scenario, dest: Path) -> Path:
    """The project as the script leaves it: every scripted Edit and Write applied in order."""
    root = scenario.materialize(dest)
    for turn in scenario.turns:
        for step in turn.steps:
            for call in step.tools:
                inp = {
                    k: v.replace("{root}", str(root)) if isinstance(v, str) else v
                    for k, v in call.input.items()
                }
                if call.name == "Edit":
                    path = Path(inp["file_path"])
                    path.write_text(path.read_text().replace(inp["old_string"], inp["new_string"], 1))
                elif call.name == "Write":
                    Path(inp["file_path"]).write_text(inp["content"])
    return root


@pytest.mark.slow
def test_claude_code_runs_a_bundled_scenario_with_prompt_suggestions(tmp_path: Path) -> None:
    cc = claude_code(tmp_path / "home")
    scenario = load_scenario(SCENARIO)
    project = scenario.materialize(tmp_path / "project")
    expected = scripted_tree(scenario, tmp_path / "expected")
    trace = tmp_path / "trace.jsonl"
    outputs: list[str] = []
    with SimServer([SCENARIO], seed=0, time_scale=TIME_SCALE, record=trace) as sim:
        prompt = scenario.turns[0].prompt
        for i, turn in enumerate(scenario.turns):
            run = cc.turn(
                prompt, project=project, base_url=sim.base_url, resume=i > 0, timeout_s=RUN_TIMEOUT_S
            )
            assert run.returncode == 0, f"turn {i + 1}: exit {run.returncode}\n{run.stderr[-2000:]}"
            assert run.result is not None and not run.result.get("is_error"), run.result
            assert run.text == turn.steps[-1].text, f"turn {i + 1} ended with another answer"
            scripted_calls = [c.name for s in turn.steps for c in s.tools]
            assert [u["name"] for u in run.tool_uses] == scripted_calls
            failed = [
                r for r in run.tool_results if r.get("is_error") and "Exit code" not in str(r.get("content"))
            ]
            assert not failed, f"turn {i + 1}: Claude Code could not run a scripted call: {failed}"
            outputs += [str(r.get("content")) for r in run.tool_results]
            assert run.suggestion == turn.suggestion, f"turn {i + 1}: prompt_suggestion {run.suggestion!r}"
            prompt = run.suggestion or ""
        stats = sim.statistics()
    assert stats.engine.fallbacks == 0, stats.engine.by_source
    assert any("1 failed, 3 passed" in o for o in outputs)  # the regression test fails before the fix ...
    assert any("29 passed" in o for o in outputs) and any(
        "30 passed" in o for o in outputs
    )  # ... then passes
    for rel in ("src/shop/pager.py", "tests/test_pager.py"):
        assert (project / rel).read_text() == (expected / rel).read_text(), f"{rel} differs from the script"
    requests: list[dict[str, Any]] = [json.loads(line)["request"] for line in trace.read_text().splitlines()]
    assert {r["model"] for r in requests} == {"claude-opus-5-5"}  # its stock default model
    assert any(m.get("role") == "system" for m in requests[0]["messages"])
    assert (
        sum("suggestion" in json.loads(line)["served"]["source"] for line in trace.read_text().splitlines())
        == 5
    )
    shutil.rmtree(tmp_path / "home", ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("path", OTHERS, ids=[p.stem for p in OTHERS])
def test_every_bundled_scenario_runs_unchanged_under_claude_code(path: Path, tmp_path: Path) -> None:
    cc = claude_code(tmp_path / "home")
    scenario = load_scenario(path)
    project = prepare_project(scenario, tmp_path / "project")  # git init + a first commit where it runs git
    with SimServer([path], seed=0, time_scale=TIME_SCALE) as sim:
        for i, turn in enumerate(scenario.turns):
            run = cc.turn(
                turn.prompt, project=project, base_url=sim.base_url, resume=i > 0, timeout_s=RUN_TIMEOUT_S
            )
            assert run.returncode == 0, f"turn {i + 1}: exit {run.returncode}\n{run.stderr[-2000:]}"
            assert run.text == turn.steps[-1].text, f"turn {i + 1} ended with another answer"
            assert [u["name"] for u in run.tool_uses] == [c.name for st in turn.steps for c in st.tools]
            # Tool errors only where a command fails by design (its exit code is what the script expects).
            failed = [
                r for r in run.tool_results if r.get("is_error") and "Exit code" not in str(r.get("content"))
            ]
            assert not failed, f"turn {i + 1}: Claude Code could not run a scripted call: {failed}"
            drawn = draw_suggestion(scenario, i, seed=0).text  # the candidate the simulator offers at seed 0
            assert run.suggestion == drawn, f"turn {i + 1}: prompt_suggestion {run.suggestion!r}"
        assert sim.statistics().engine.fallbacks == 0


COMPACT = """
name: cc-compact
turns:
  - prompt: "remember the word alpha"
    steps:
      - text: "Remembered."
    suggestion: null
  - prompt: "which word was it?"
    steps:
      - text: "It was alpha."
    suggestion: null
"""


@pytest.mark.slow
def test_claude_codes_compact_is_answered_with_a_summary_and_the_script_goes_on(tmp_path: Path) -> None:
    from speculate.sim.scenario_yaml import parse_scenario

    cc = claude_code(tmp_path / "home")
    project = tmp_path / "project"
    project.mkdir()
    trace = tmp_path / "trace.jsonl"
    with SimServer([parse_scenario(COMPACT)], seed=0, time_scale=TIME_SCALE, record=trace) as sim:
        texts = []
        for i, prompt in enumerate(["remember the word alpha", "/compact", "which word was it?"]):
            run = cc.turn(
                prompt, project=project, base_url=sim.base_url, resume=i > 0, timeout_s=RUN_TIMEOUT_S
            )
            assert run.returncode == 0, f"{prompt}: exit {run.returncode}\n{run.stderr[-2000:]}"
            texts.append(run.text)
        stats = sim.statistics()
    assert texts[2] == "It was alpha."  # the turn after /compact is on the script
    served = [json.loads(line)["served"]["source"] for line in trace.read_text().splitlines()]
    assert [s for s in served if s.startswith("compaction")] == ["compaction summary of 1 prompts"]
    assert stats.engine.fallbacks == 0, stats.engine.by_source
