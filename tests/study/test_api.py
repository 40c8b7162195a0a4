"""The study through the Python API: a session on the simulator with a study recorder, driven by the simulated
user of bench/study_sim.py (take, edit, ignore forced turn by turn). The arms logged are the seed's sequence,
each arm does what it says (the fork's answer, a normal turn, no ghost text), the person's choices are
classified as made, and the study works with every model backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bench.study_sim import Person, run_session
from speculate.study.arms import sequence
from speculate.study.records import read_session

PERSON = Person("p", take=1.0, edit=0.0, think_median_s=2.0, typing_cps=20.0, patient=True)
SCALE = 0.05


def run(
    tmp_path: Path,
    *,
    seed: int,
    arms: tuple[str, ...] = ("speculative", "suggest"),
    decisions: Any = None,
    backend: str = "sim",
    name: str = "a",
    max_turns: int | None = None,
) -> Any:
    work = tmp_path / f"work-{name}"
    work.mkdir()
    rec = trio.run(
        lambda: run_session(
            study_dir=tmp_path / "study",
            person=PERSON,
            scenario="fix-pagination",
            seed=seed,
            arms=arms,
            time_scale=SCALE,
            work=work,
            decisions=decisions,
            backend=backend,
            max_turns=max_turns,
        )
    )
    return read_session(rec.path)


def test_arms_follow_the_seed_and_each_arm_does_what_it_says(tmp_path: Path) -> None:
    s = run(tmp_path, seed=25, name="a")
    again = run(tmp_path, seed=25, name="b")
    other = run(tmp_path, seed=1, name="c")
    n = len(s.assignments)
    assert n == len(s.turns) + 1  # the last draw is for a turn that never came
    assert [a.arm for a in s.assignments] == sequence(25, n) == [a.arm for a in again.assignments]
    assert [a.arm for a in other.assignments] == sequence(1, len(other.assignments)) != sequence(25, n)
    assert all(a.seed == 25 for a in s.assignments) and s.start.seed == 25
    assert (
        s.start.time_scale == SCALE and s.start.frontend == "api"
    )  # its seconds are the simulator's, scaled
    assert [a.draw for a in s.assignments] == list(range(1, n + 1))
    assert [a.after_turn for a in s.assignments] == list(range(n))
    assert [t.arm for t in s.turns] == sequence(25, len(s.turns))
    # Everything taken as-is: the speculative arm answers from the fork, the suggest arm runs a normal turn.
    later = [t for t in s.turns if t.eligible]
    assert {t.arm for t in later} == {"speculative", "suggest"}, "seed 25 should give both arms"
    for t in later:
        assert t.taken == "taken" and t.suggestion_source == "model" and t.prompt == t.suggestion
        assert t.accepted == (t.arm == "speculative"), t
        assert (t.speculation is not None) == (t.arm == "speculative"), t
        assert t.suggestion_outcome == "accepted" and t.engine_cost_usd > 0
        assert t.shown_s is not None and t.first_key_s is not None and t.think_s is not None
        assert 0 <= t.shown_s <= t.first_key_s <= t.submit_s
        assert t.think_s == pytest.approx(t.first_key_s - t.shown_s)
        assert t.typing_s == pytest.approx(t.submit_s - t.first_key_s)
        assert t.ttft_s is not None and 0 <= t.ttft_s <= t.latency_s
    first = s.turns[0]
    assert not first.eligible and first.suggestion is None and first.taken == "none"
    assert [t.ready_at for t in s.turns] == sorted(t.ready_at for t in s.turns)
    assert s.end is not None and s.end.turns == len(s.turns)


def test_edits_and_ignores_are_classified_and_the_plain_arm_shows_nothing(tmp_path: Path) -> None:
    # The forced choices apply, in order, to the turns that show a suggestion (an edited or ignored prompt is
    # off the script: the simulator's next suggestion may be none, and the person types the script's prompt).
    decisions = ["edit", "ignore", "take", "take", "take"]
    s = run(tmp_path, seed=2, arms=("suggest", "plain"), decisions=decisions, max_turns=8)
    shown = [t for t in s.turns if t.suggestion is not None]
    want = {"edit": "edited", "ignore": "ignored", "take": "taken"}
    assert [t.taken for t in shown] == [want[d] for d in decisions[: len(shown)]]
    assert len(shown) >= 2
    assert shown[0].took_ghost and shown[0].prompt.startswith(shown[0].suggestion or "?")
    assert shown[0].similarity is not None and shown[0].similarity >= 0.5
    assert not shown[1].took_ghost and shown[1].similarity is not None and shown[1].similarity < 0.75
    assert shown[1].suggestion_outcome == "ignored"  # the engine's record agrees
    plain = [t for t in s.turns if t.arm == "plain"]
    assert plain, "seed 2 should draw the plain arm"
    for t in plain:
        assert t.suggestion is None and t.taken == "none" and t.speculation is None
        assert t.engine_cost_usd == 0.0  # no suggestion was even generated before it
    assert all(t.arm == "suggest" for t in shown)


@pytest.mark.parametrize("backend", ["anthropic", "claude-cli"])
def test_the_study_runs_on_every_backend(tmp_path: Path, backend: str) -> None:
    if backend == "claude-cli":
        from speculate.sim.claude_code import ClaudeCode

        if isinstance(found := ClaudeCode.locate(), str):
            pytest.skip(found)
    s = run(tmp_path, seed=25, backend=backend, max_turns=3)
    assert s.start.model == backend
    assert [t.arm for t in s.turns] == sequence(25, len(s.turns))
    later = [t for t in s.turns if t.eligible and t.suggestion is not None]
    assert later and all(t.accepted == (t.arm == "speculative") for t in later)
    lines = [json.loads(x) for x in s.path.read_text().splitlines()]
    assert [x["kind"] for x in lines][:2] == ["session", "assign"] and lines[-1]["kind"] == "end"
