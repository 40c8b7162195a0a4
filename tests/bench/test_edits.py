"""Harm: the simulated user's mid-think edits are drawn per (seed, scenario, rep, turn), hit a file the
coming turn writes, and are the same for every arm."""

from __future__ import annotations

from pathlib import Path

from bench.edits import maybe_edit, written_paths
from speculate.sim.scenario import Step, ToolCall

STEPS = (
    Step(tools=(ToolCall("Edit", {"file_path": "{root}/src/a.py", "old_string": "x", "new_string": "y"}),)),
    Step(text="done"),
)


def project(tmp: Path) -> Path:
    (tmp / "src").mkdir(parents=True)
    (tmp / "src/a.py").write_text("x = 1\n")
    return tmp


def test_the_edit_targets_what_the_turn_writes_and_is_reproducible(tmp_path: Path) -> None:
    a, b = project(tmp_path / "a"), project(tmp_path / "b")
    assert written_paths(STEPS, a) == [a / "src/a.py"]
    ea = maybe_edit(a, STEPS, prob=1.0, seed=3, scenario="s", rep=0, turn=2)
    eb = maybe_edit(b, STEPS, prob=1.0, seed=3, scenario="s", rep=0, turn=2)
    assert ea == eb == "src/a.py"
    assert (
        (a / "src/a.py").read_text()
        == (b / "src/a.py").read_text()
        == "x = 1\n# note from the user before turn 3\n"
    )


def test_probability_zero_never_edits_and_draws_vary_by_turn(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert maybe_edit(root, STEPS, prob=0.0, seed=1, scenario="s", rep=0, turn=1) is None
    hits = [
        maybe_edit(root, STEPS, prob=0.3, seed=1, scenario="s", rep=0, turn=t) is not None for t in range(200)
    ]
    assert 30 < sum(hits) < 90
