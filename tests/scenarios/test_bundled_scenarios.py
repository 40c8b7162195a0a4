"""The bundled scenarios (bench/scenarios/*.yaml) replay for real against their workspace.

The simulator only scripts the model; tool results come from really running the tools. So every scripted
call must succeed on the project as it is at that point of the conversation (an Edit's old_string found
exactly once, Read paths existing, Bash commands exiting as the text claims), and the suggestion_steps
must succeed from the state after their turn. A small local executor with the tools' semantics replays
them here, so a broken scenario fails in CI rather than in a benchmark run.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from .replay import Replayer, ToolsReplayer, replay_steps

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "bench" / "scenarios"
SCENARIO_FILES = sorted(SCENARIO_DIR.glob("*.yaml"))

# Commands a permission classifier must stop a speculation at (network, publishing, destructive).
RISKY = re.compile(r"\b(git push|pip install|curl|wget|rm -rf|git reset --hard|git clean)\b")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path}: top level must be a mapping"
    return data


SCENARIOS = {p.stem: _load(p) for p in SCENARIO_FILES}


def _candidate_steps(turn: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(text, steps) of every suggestion with steps of its own: the old single form's suggestion_steps or
    each weighted candidate's."""
    if turn.get("suggestion_steps"):
        return [(turn["suggestion"], turn["suggestion_steps"])]
    return [(c["text"], c["steps"]) for c in turn.get("suggestions") or [] if c.get("steps")]


def _bash_steps(scenario: dict[str, Any]) -> list[tuple[int, dict[str, Any], bool]]:
    """(turn index, step, is_from_a_suggestion) for every step of the scenario that runs Bash."""
    out = []
    for i, turn in enumerate(scenario["turns"]):
        groups = [(turn["steps"], False)] + [(steps, True) for _, steps in _candidate_steps(turn)]
        for steps, spec in groups:
            out += [(i, step, spec) for step in steps if any("Bash" in c for c in step.get("tools") or [])]
    return out


def _bash_commands(scenario: dict[str, Any]) -> list[tuple[int, str, bool]]:
    """(turn index, command, is_from_suggestion_steps) for every Bash call in the scenario."""
    return [
        (i, call["Bash"]["command"], spec)
        for i, step, spec in _bash_steps(scenario)
        for call in step["tools"]
        if "Bash" in call
    ]


def _needs_git(scenario: dict[str, Any]) -> bool:
    return any(re.search(r"\bgit\b", cmd) for _, cmd, _ in _bash_commands(scenario))


def _materialize(scenario: dict[str, Any], dest: Path) -> Path:
    shutil.copytree(SCENARIO_DIR / "workspaces" / scenario["workspace"], dest)
    for rel, content in (scenario.get("files") or {}).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(content, encoding="utf-8")
    if _needs_git(scenario):
        rp = Replayer(dest, scenario["name"])
        for cmd in ("git init -q", "git add -A", "git commit -q -m initial"):
            code, out = rp.do_bash(cmd)
            assert code == 0, f"{cmd}: {out}"
    return dest


def _tools_available() -> bool:
    try:
        import speculate.fs
        import speculate.tools

        return hasattr(speculate.fs, "LocalShell") and hasattr(speculate.tools, "tools_by_name")
    except ImportError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(SCENARIOS))
def test_scenario_replays_for_real(stem: str, tmp_path: Path) -> None:
    """Through the agent's own tools on LocalFS / LocalShell where they are built (so scenarios and tools
    are checked against each other), else through this file's executor."""
    scenario = SCENARIOS[stem]
    root = _materialize(scenario, tmp_path / "project")
    make = ToolsReplayer if _tools_available() else Replayer
    rp = make(root, scenario["name"])
    for t, turn in enumerate(scenario["turns"]):
        replay_steps(rp, turn["steps"], f"{stem} turn {t}")
        for c, (text, steps) in enumerate(_candidate_steps(turn)):
            # What the agent would do had the suggestion been run: from this state, in a throwaway copy.
            fork = Path(shutil.copytree(root, tmp_path / f"fork{t}-{c}", symlinks=True))
            fork_rp = make(fork, scenario["name"])
            fork_rp.read = {fork / p.relative_to(root) for p in rp.read}
            replay_steps(fork_rp, steps, f"{stem} turn {t} suggestion {text!r}")


@pytest.mark.parametrize("stem", sorted(SCENARIOS))
def test_scenario_shape(stem: str) -> None:
    scenario = SCENARIOS[stem]
    assert scenario["name"] == stem, "the file is named after the scenario"
    assert (SCENARIO_DIR / "workspaces" / scenario["workspace"]).is_dir()
    assert scenario.get("description")
    turns = scenario["turns"]
    assert 4 <= len(turns) <= 10
    prompts = [t["prompt"] for t in turns]
    for i, turn in enumerate(turns):
        steps = turn["steps"]
        assert all(step.get("tools") for step in steps[:-1]) and not steps[-1].get("tools")
        assert steps[-1].get("text"), f"turn {i} ends without an answer"
        nxt = prompts[i + 1] if i + 1 < len(turns) else None
        suggestion = turn.get("suggestion")
        needs_steps = suggestion is not None and suggestion != nxt
        assert bool(turn.get("suggestion_steps")) == needs_steps, f"turn {i}: suggestion_steps vs suggestion"
    if _needs_git(scenario):
        assert "git" in scenario["description"], "a scenario that runs git says so in its description"


EDITS = ("Edit", "Write", "edit", "write")


def _tools(steps: list[dict[str, Any]]) -> list[str]:
    return [name for step in steps for call in step.get("tools") or [] for name in call]


@pytest.mark.parametrize("stem", sorted(SCENARIOS))
def test_every_miss_does_comparable_checked_work(stem: str) -> None:
    """Every turn that has a next turn has a wrong candidate, and every wrong candidate does work like the
    turn it stands in for: a checked command run, files changed where that turn changes files, and about
    as many model requests (a one-`git show` miss would make a forced miss cheap)."""
    turns = SCENARIOS[stem]["turns"]
    for i, turn in enumerate(turns[:-1]):
        hit = turns[i + 1]
        wrong = [(text, steps) for text, steps in _candidate_steps(turn) if text != hit["prompt"]]
        assert wrong, f"{stem} turn {i}: no wrong candidate with steps"
        for text, steps in wrong:
            where = f"{stem} turn {i} candidate {text!r}"
            assert any(
                "Bash" in c for step in steps for c in step.get("tools") or [] if step.get("expect")
            ), f"{where}: runs no checked command"
            if any(t in EDITS for t in _tools(hit["steps"])):
                assert any(t in EDITS for t in _tools(steps)), (
                    f"{where}: changes no file, the turn it misses does"
                )
            assert len(steps) >= min(3, len(hit["steps"])), (
                f"{where}: {len(steps)} requests vs {len(hit['steps'])}"
            )


@pytest.mark.parametrize("stem", sorted(SCENARIOS))
def test_every_suggestion_passes_the_engines_filter(stem: str) -> None:
    """A suggestion the engine filters out is never shown or forked: its candidate would never run."""
    from speculate.speculation import filters

    for i, turn in enumerate(SCENARIOS[stem]["turns"]):
        texts = [c["text"] for c in turn.get("suggestions") or [] if c.get("text")] + (
            [turn["suggestion"]] if turn.get("suggestion") else []
        )
        for text in texts:
            verdict = filters.check(text)
            assert verdict.ok, f"{stem} turn {i}: {text!r} is filtered ({verdict.reason})"


@pytest.mark.parametrize("stem", sorted(SCENARIOS))
def test_every_bash_step_is_checked(stem: str) -> None:
    for i, step, spec in _bash_steps(SCENARIOS[stem]):
        assert step.get("expect"), (
            f"{stem} turn {i}{' (a suggestion)' if spec else ''}: Bash step without expect"
        )


def test_suite_invariants() -> None:
    assert len(SCENARIOS) >= 7
    names = [s["name"] for s in SCENARIOS.values()]
    assert len(set(names)) == len(names)
    firsts = [s["turns"][0]["prompt"] for s in SCENARIOS.values()]
    assert len(set(firsts)) == len(firsts), "the simulator tells scenarios apart by their first prompt"

    def offered(turn: dict[str, Any]) -> str | None:  # the old single suggestion, or the heaviest candidate
        cands = turn.get("suggestions")
        return max(cands, key=lambda c: c.get("weight", 1))["text"] if cands else turn.get("suggestion")

    def accepted(s: dict[str, Any]) -> list[bool]:
        t = s["turns"]
        return [offered(t[i]) == t[i + 1]["prompt"] for i in range(len(t) - 1)]

    flags = [a for s in SCENARIOS.values() for a in accepted(s)]
    assert sum(flags) / len(flags) >= 0.5, "suggestions should mostly match the next prompt"
    assert any(not all(accepted(s)) for s in SCENARIOS.values()), "no scenario ignores a suggestion"
    assert any(RISKY.search(cmd) for s in SCENARIOS.values() for _, cmd, _ in _bash_commands(s))
    # A delete the speculation performs: an `rm` in a turn reached by an accepted suggestion.
    assert any(
        re.search(r"(^|&&|;)\s*rm\s", cmd) and t > 0 and accepted(s)[t - 1] and not spec
        for s in SCENARIOS.values()
        for t, cmd, spec in _bash_commands(s)
    )


def test_bundled_scenarios_pass_the_loader() -> None:
    import speculate.sim.scenario as scenario_mod
    import speculate.sim.scenario_yaml as yaml_mod

    loaded = [yaml_mod.load_scenario(p) for p in SCENARIO_FILES]
    scenario_mod.check_unique(loaded)
    assert [s.name for s in loaded] == [SCENARIOS[p.stem]["name"] for p in SCENARIO_FILES]
