"""Top-K speculation: K candidates from one suggestion request, one fork (and overlay) each, accepting any of
them promotes that one and discards the others, and the forks' shared token budget stops the lowest rank."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from speculate.models.anthropic import AnthropicModel
from speculate.prompts import SUGGESTION_INSTRUCTION, suggestion_instruction
from speculate.session import SessionConfig, open_session
from speculate.sim.draw import draw, draw_candidates
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.speculation.filters import check_many

from .conftest import make_project, tree_hash

TOPK = """
name: topk-test
description: two candidates after the first turn, each with work behind it
turns:
  - prompt: "look at both files"
    steps:
      - tools:
          - Read: {file_path: "{root}/a.txt"}
      - text: "Both are there."
    suggestions:
      - {text: "change alpha to gamma", weight: 3}
      - text: "change beta to delta"
        weight: 2
        steps:
          - tools:
              - Edit: {file_path: "{root}/b.txt", old_string: "beta", new_string: "delta"}
          - text: "Changed b.txt."
      - {text: "show me the readme", weight: 0, steps: [{text: "There is no readme."}]}
  - prompt: "change alpha to gamma"
    steps:
      - tools:
          - Edit: {file_path: "{root}/a.txt", old_string: "alpha", new_string: "gamma"}
      - text: "Changed a.txt."
    suggestion: null
"""


def test_k_lines_are_filtered_one_by_one() -> None:
    texts, _ = check_many("1. run the tests\n- run the tests\n\nGreat work!\ncommit it\nand push\n", 2)
    assert texts == [
        "run the tests",
        "commit it",
    ]  # markers stripped, the duplicate and the evaluative dropped
    assert check_many("Great work!\n**bold**", 3) == ([], "evaluative")
    assert suggestion_instruction(1) == SUGGESTION_INSTRUCTION  # K 1: the request's bytes are unchanged
    assert "up to 3 alternatives" in suggestion_instruction(3)


def test_the_simulator_draws_k_candidates_by_weight_the_first_as_before() -> None:
    sc = parse_scenario(TOPK)
    for seed in range(20):
        first = draw(sc, 0, seed=seed)[0]
        two = draw_candidates(sc, 0, seed=seed, k=2)
        assert two[0] == first and len(two) == 2 and two[1] != first
        assert "show me the readme" not in [
            c.text for c in draw_candidates(sc, 0, seed=seed, k=3)
        ]  # weight 0
        assert two == draw_candidates(sc, 0, seed=seed, k=2)  # the same seed, the same candidates
    # under a forced rate the weight-0 wrong guess may be offered too
    assert len(draw_candidates(sc, 0, seed=1, k=3, hit_rate=0.0)) == 3


def test_accepting_the_second_candidate_promotes_its_overlay_and_discards_the_first(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> None:
        with SimServer([parse_scenario(TOPK)], time_scale=0.02) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
                cfg = SessionConfig(project=root, model=model, spec_candidates=2)
                async with open_session(cfg) as s:
                    await s.submit("look at both files")
                    await s.wait_suggestion()
                    cands = s.suggestions
                    assert sorted(cands) == ["change alpha to gamma", "change beta to delta"]
                    assert s.suggestion == cands[0]  # the ghost text is the first
                    await s.wait_speculation()
                    forks = {f.suggestion: f for f in s.engine.forks.forks}
                    assert set(forks) == set(cands) and {f.rank for f in forks.values()} == {0, 1}
                    uppers = {t: f.overlay.upper for t, f in forks.items()}
                    assert len(set(uppers.values())) == 2 and all(u.exists() for u in uppers.values())
                    before = tree_hash(root)
                    assert (root / "a.txt").read_text() == "alpha\n" and (
                        root / "b.txt"
                    ).read_text() == "beta\n"
                    second = cands[1]
                    out = await s.submit(second)
                    assert out.accepted and tree_hash(root) != before
                    if second == "change beta to delta":
                        assert (root / "b.txt").read_text() == "delta\n" and (
                            root / "a.txt"
                        ).read_text() == "alpha\n"
                    else:
                        assert (root / "a.txt").read_text() == "gamma\n" and (
                            root / "b.txt"
                        ).read_text() == "beta\n"
                    assert not uppers[cands[0]].exists()  # the first's overlay is gone
                    specs = {r.suggestion: r for r in s.events.records if r.kind == "speculation"}
                    assert specs[second].outcome == "accepted"
                    assert (
                        specs[cands[0]].outcome == "aborted" and specs[cands[0]].reason == "other_candidate"
                    )
                    (sugg, *_) = [r for r in s.events.records if r.kind == "suggestion"]
                    assert sugg.candidates == cands and sugg.chosen == 1 and sugg.outcome == "accepted"
                    assert [d.rank for d in sugg.decisions] == [0, 1] and all(d.fork for d in sugg.decisions)

    trio.run(main)


def test_ignoring_discards_every_fork(tmp_path: Path) -> None:
    root = make_project(tmp_path)

    async def main() -> None:
        with SimServer([parse_scenario(TOPK)], time_scale=0.02) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
                async with open_session(SessionConfig(project=root, model=model, spec_candidates=2)) as s:
                    await s.submit("look at both files")
                    await s.wait_suggestion()
                    await s.wait_speculation()
                    uppers = [f.overlay.upper for f in s.engine.forks.forks]
                    before = tree_hash(root)
                    await s.submit("something else entirely")
                    assert tree_hash(root) == before and not any(u.exists() for u in uppers)
                    outcomes = [r.outcome for r in s.events.records if r.kind == "speculation"]
                    assert outcomes == ["aborted", "aborted"]

    trio.run(main)


def test_the_shared_token_budget_stops_the_lowest_rank_first(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"speculation": {"candidates": 2, "budget": {"tokens": 1, "cpus": 1}}})
    )

    async def main() -> None:
        with SimServer([parse_scenario(TOPK)], time_scale=0.02) as sim:
            async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
                async with open_session(SessionConfig(project=root, model=model)) as s:
                    await s.submit("look at both files")
                    await s.wait_suggestion()
                    await s.wait_speculation()
                    by_rank = {f.rank: f for f in s.engine.forks.forks}
                    assert by_rank[1].record.boundary == "budget"
                    assert "token budget (1)" in by_rank[1].record.boundary_detail
                    # what the lowest rank did so far is still acceptable, as at any boundary
                    out = await s.submit(by_rank[1].suggestion)
                    assert out.error == "" and out.accepted

    trio.run(main)


def test_the_cpu_budget_runs_the_forks_commands_one_at_a_time() -> None:
    from speculate import ShellResult
    from speculate.speculation.topk import ForkSet

    running, peak = 0, 0

    class Slow:
        async def run(self, command: str, *, timeout: float) -> ShellResult:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await trio.sleep(0.05)
            running -= 1
            return ShellResult(command, "", 0)

    async def main(cpus: int | None) -> int:
        nonlocal peak
        peak = 0
        forks = ForkSet(cpus=cpus)
        shells = [forks.wrap_shell(Slow()) for _ in range(3)]
        async with trio.open_nursery() as n:
            for sh in shells:
                n.start_soon(lambda sh=sh: sh.run("true", timeout=1))
        return peak

    assert trio.run(main, 1) == 1
    assert trio.run(main, None) == 3  # no budget: as before
