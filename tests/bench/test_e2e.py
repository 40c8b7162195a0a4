"""An end-to-end quick run on the simulator: every output file, consistent numbers, no leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import bench_main
from bench.plots import PLOTS
from bench.workspace import manifest
from overlayfs.state import project_state
from speculate.sim.scenario import default_scenario_dir
from tests.overlay.crashkit import interrupt_promotion


@pytest.mark.slow
def test_quick_run_produces_every_output_with_consistent_numbers(
    tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspaces = default_scenario_dir() / "workspaces"
    before = manifest(workspaces)
    left = tmp_path / "left"  # a project a killed process left mid-acceptance: the bench recovers it first
    left.mkdir()
    (left / "a.txt").write_bytes(b"old\n")
    interrupt_promotion(left, "a.txt", b"new\n", "commit")
    out = tmp_path / "run"
    rc = bench_main(
        [
            "--scenario",
            "explain-codebase",
            "--reps",
            "1",
            "--time-scale",
            "0.05",
            "--think-time",
            "fixed:20",
            "--concurrency",
            "2",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    assert (
        f"recovered: rolled forward an interrupted acceptance of 1 change in {left}"
        in capsys.readouterr().err
    )
    assert (left / "a.txt").read_bytes() == b"new\n"
    assert [p.name for p in (state_dir / "projects").iterdir()] == [project_state(left).dir.name]  # tidied
    for name in ("turns.jsonl", "sessions.jsonl", "events.jsonl", "summary.json", "report.md", *PLOTS):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    for name in PLOTS:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert manifest(workspaces) == before  # the bundled workspace itself was never touched

    s = json.loads((out / "summary.json").read_text())
    turns = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    sessions = [json.loads(x) for x in (out / "sessions.jsonl").read_text().splitlines()]
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    for key in ("turn_latency_s", "session_wall_s"):
        for arm in ("plain", "speculative"):
            assert set(s["arms"][arm][key]) >= {"p50", "p90", "p99"}
    for key in (
        "accepted",
        "acceptance_rate",
        "time_saved_s",
        "efficiency",
        "fork_cache_read_share",
        "cost_usd",
        "wasted_tokens",
        "boundaries",
        "backend",
        "seed",
    ):
        assert key in s, key
    assert s["backend"] == "sim" and s["seed"] == 0 and s["leaks"] == 0
    assert len(sessions) == 3 and {x["arm"] for x in sessions} == {"plain", "suggest", "speculative"}
    n = len(turns) // 3
    assert (
        n >= 3
        and s["arms"]["plain"]["turns"]
        == s["arms"]["suggest"]["turns"]
        == s["arms"]["speculative"]["turns"]
        == n
    )
    assert set(s["vs"]) == {"suggest", "plain"} and s["turn_errors"] == []
    assert s["efficiency"]["pooled"] is None or s["efficiency"]["pooled"] <= 1.0
    assert not any(t["error"] for t in turns)

    plain = {t["turn"]: t for t in turns if t["arm"] == "plain"}
    spec = {t["turn"]: t for t in turns if t["arm"] == "speculative"}
    assert [plain[i]["prompt"] for i in range(n)] == [spec[i]["prompt"] for i in range(n)]  # paired
    accepted = [t for t in spec.values() if t["accepted"]]
    shown = [t for t in spec.values() if t["suggestion_shown"] is not None or t["accepted"]]
    # 20 s of simulated think time is plenty: every scripted suggestion is shown and the matching ones taken.
    assert 0 < len(accepted) < len(shown) == n - 1
    assert s["accepted"] == len(accepted) <= s["suggestion_outcomes"].get("accepted", 0) + 0
    assert s["acceptance_rate"] == pytest.approx(len(accepted) / len(shown))
    for t in accepted:
        saving = plain[t["turn"]]["latency_s"] - t["latency_s"]
        assert saving <= plain[t["turn"]]["latency_s"]
        assert t["speculation"]["time_saved_s"] <= plain[t["turn"]]["latency_s"] + 0.5
        assert t["speculation"]["outcome"] == "accepted"
    assert s["time_saved_s"]["n"] == len(accepted)
    assert s["time_saved_s"]["median"] > 0  # a read-only fork that had 1 s (scaled) to run saved time
    spec_recs = [e for e in events if e["kind"] == "speculation"]
    assert sum(e["outcome"] == "accepted" for e in spec_recs) == len(accepted)
    # A fork either stopped (complete or at a boundary) or was thrown away while it ran: the wrong
    # candidate's fork runs pytest at real speed, which 1 s of scaled think time may not cover.
    assert sum(s["boundaries"].values()) == sum(bool(e["boundary"]) for e in spec_recs)
    assert all(e["boundary"] or e["outcome"] == "aborted" for e in spec_recs)
    assert 0.5 < s["fork_cache_read_share"] <= 1.0  # the fork reads the parent's prompt cache
    assert s["cost_usd"]["speculative"] > s["cost_usd"]["plain"] > 0
    assert s["wasted_tokens"] > 0  # the ignored suggestion's fork
    report = (out / "report.md").read_text()
    assert "## Headline" in report and "latency_cdf.png" in report
    assert "Sessions ran 2 at a time" in report and "speculative vs suggest" in report

    # --compare on the run against itself: every delta is zero.
    assert bench_main(["--compare", str(out), str(out)]) == 0
    cmp = capsys.readouterr().out
    assert "| accepted |" in cmp and "+1" not in cmp.split("| accepted |")[1].splitlines()[0]


def test_bad_options_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--scenario", "no-such-scenario", "--out", str(tmp_path / "x")]) == 2
    assert "--scenario 'no-such-scenario'" in capsys.readouterr().err
    assert bench_main(["--think-time", "fixed:abc", "--out", str(tmp_path / "x")]) == 2
    assert "fixed:abc" in capsys.readouterr().err
    assert bench_main(["--accept-prob", "1.5", "--out", str(tmp_path / "x")]) == 2
    assert "--accept-prob 1.5" in capsys.readouterr().err
    assert bench_main(["--accept-prob", "natural,often", "--out", str(tmp_path / "x")]) == 2
    assert "'often' is neither a number nor 'natural'" in capsys.readouterr().err
    assert bench_main(["--profile", "gpt-9", "--out", str(tmp_path / "x")]) == 2
    assert "--profile 'gpt-9'" in capsys.readouterr().err
    assert bench_main(["--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing ran


@pytest.mark.slow
def test_forced_acceptance_sweep_stays_on_script(tmp_path: Path, state_dir: Path) -> None:
    """p=0 and p=1 move what the model suggests, never what the user wants: every turn still meets its
    scripted expectations (the run exits 0), acceptance follows the forced rate, and misses do real work."""
    out = tmp_path / "sweep"
    rc = bench_main(
        [
            "--scenario",
            "fix-pagination",
            "--reps",
            "1",
            "--time-scale",
            "0.05",
            "--think-time",
            "fixed:20",
            "--accept-prob",
            "natural,0,1",
            "--user-edit-prob",
            "0",
            "--out",
            str(out),
        ]
    )
    s = json.loads((out / "summary.json").read_text())
    assert rc == 0 and s["turn_errors"] == [] and s["leaks"] == 0
    natural, never, always = s["conditions_detail"]
    assert (
        natural["accept_prob"] is None
        and natural["miss_kinds"] == {}
        and (never["accept_prob"], always["accept_prob"]) == (0, 1)
    )
    assert never["accepted"] == 0 and never["suggestion_coverage"] == 1.0
    assert sum(never["miss_kinds"].values()) > 0 and always["miss_kinds"] == {}
    assert always["acceptance_rate"] == 1.0
    turns = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    prompts = {(t["cond"], t["arm"]): [] for t in turns}
    for t in sorted(turns, key=lambda t: t["turn"]):
        prompts[t["cond"], t["arm"]].append(t["prompt"])
    assert len({tuple(p) for p in prompts.values()}) == 1  # every arm and condition sends the same prompts
    assert "sample_project" in s["toolchains"] and "misses (candidate" in (out / "report.md").read_text()


@pytest.mark.slow
def test_a_bundled_scenario_runs_on_the_claude_cli_backend(tmp_path: Path) -> None:
    """--model claude-cli: the Claude Code CLI (text tool calling) against the embedded simulator, which
    answers every bundled scenario in <tool_use> text; every arm finishes every turn on the script."""
    from speculate.sim.claude_code import ClaudeCode

    if isinstance(why := ClaudeCode.locate(), str):
        pytest.skip(why)
    out = tmp_path / "run"
    rc = bench_main(
        [
            "--model",
            "claude-cli",
            "--scenario",
            "explain-codebase",
            "--reps",
            "1",
            "--time-scale",
            "0.05",
            "--think-time",
            "fixed:20",
            "--concurrency",
            "3",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    turns = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert s["backend"] == "claude-cli" and s["turn_errors"] == [] and s["leaks"] == 0
    assert len(turns) == 3 * 5 and not any(t["error"] or t["fallback"] for t in turns)
    # Whether a suggestion (a CLI run of its own) arrives before the simulated user types depends on the
    # machine's load; tests/agent/test_claude_cli.py accepts a speculation through the CLI deterministically.
