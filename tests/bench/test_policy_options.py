"""The bench's policy options: λ and K as conditions (labels unchanged without them), bad values named, a
policy history made from a run's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import bench_main
from bench.run_options import build_config, build_parser


def config(*args: str):
    return build_config(build_parser().parse_args(["--quick", *args]))


def test_values_and_ks_are_conditions_and_the_default_is_unchanged() -> None:
    (plain,) = config().conditions
    assert plain.spec_value is None and plain.spec_k == 1
    assert plain.label == "lognormal natural claude-sonnet-4-6"  # old runs still --compare with new ones
    conds = config(
        "--accept-prob", "natural,0", "--spec-value", "0.01,inf", "--spec-candidates", "1,2"
    ).conditions
    assert len(conds) == 8
    assert {(c.spec_value, c.spec_k) for c in conds} == {(0.01, 1), (0.01, 2), (None, 1), (None, 2)}
    assert "lognormal p=0 claude-sonnet-4-6 λ=0.01 K=2" in {c.label for c in conds}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--spec-value", "-1"], "--spec-value"),
        (["--spec-value", "cheap"], "--spec-value"),
        (["--spec-candidates", "9"], "--spec-candidates"),
        (["--ray-workers", "2"], "--ray-workers"),
    ],
)
def test_bad_policy_options_are_refused_naming_the_option(
    args: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_main([*args, "--out", str(tmp_path / "x")]) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_history_file_that_is_not_json_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "h.json"
    bad.write_text("{not json")
    assert bench_main(["--spec-history", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert f"--spec-history {bad}" in capsys.readouterr().err


def test_a_history_replays_a_runs_choices(tmp_path: Path) -> None:
    from bench.policy_history import history
    from speculate.speculation.events import Decision

    run = tmp_path / "run"
    run.mkdir()
    key = {
        "pair": "c0/s/r0",
        "scenario": "s",
        "rep": 0,
        "seed": 1,
        "cond": 0,
        "condition": "c",
        "think_model": "fixed:1",
        "accept_prob": 0.0,
        "model_name": "m",
        "think_s": 1.0,
        "input_s": 1.0,
        "input": "typed",
        "suggestion_shown": None,
        "suggestion_matched": False,
        "suggestion_at_submit": None,
        "accepted": False,
        "error": "",
        "note": "",
        "stop": "end_turn",
        "ttft_s": None,
        "requests": 1,
        "tokens": {},
        "cost_usd": 0.0,
        "speculation": None,
        "leak": [],
    }
    turns = [
        {
            **key,
            "session": "c0/s/r0/speculative",
            "arm": "speculative",
            "turn": i,
            "prompt": f"p{i}",
            "latency_s": 2.0,
        }
        for i in range(3)
    ]
    (run / "turns.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    d = Decision(
        text="x y",
        p_accept=0.5,
        expected_saving_s=1.0,
        expected_cost_usd=0.01,
        fork=True,
        features={"prev": "none", "tools": "Read", "context": "<8k", "first_word": "x", "length": "2-4"},
    )
    events = [
        {
            "kind": "suggestion",
            "session": "c0/s/r0/speculative",
            "arm": "speculative",
            "turn": t,
            "outcome": "ignored",
            "time_to_decision_s": 0.5,
            "decisions": [d.model_dump()],
        }
        for t in (1, 2)
    ]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    state = history(run, 0.0)
    assert state["counts"]["rank=0"] == [0, 2]
    n, total = state["estimates"]["saving_s"]
    assert n == 3 and total == pytest.approx(2.0 + 0.5 + 0.5)  # turn 0 its latency; then min(2.0, 0.5)
    with pytest.raises(ValueError, match="no speculative turns"):
        history(run, None)
