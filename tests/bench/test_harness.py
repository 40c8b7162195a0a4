"""Job planning (pairing, interleaving, seeds) and the workspace canary, without running sessions."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bench.plan import Condition, RunConfig, plan_jobs, rep_seed
from bench.user import FixedThink
from bench.workspace import changed, manifest, prepare_workspace, tree_hash
from speculate.sim.scenario import Scenario, Step, Turn


def scenario(name: str) -> Scenario:
    return Scenario(
        name=name, turns=(Turn(prompt="hi", steps=(Step(text="hello"),)),), files={"src/a.py": "x = 1\n"}
    )


def test_jobs_are_grouped_interleaved_and_rotated() -> None:
    cfg = RunConfig(
        scenarios=[scenario("a"), scenario("b")],
        reps=2,
        seed=10,
        conditions=[Condition(think=FixedThink(0)), Condition(think=FixedThink(5))],
    )
    jobs = plan_jobs(cfg)
    assert len(jobs) == 2 * 2 * 2 * 3
    groups = [jobs[i : i + 3] for i in range(0, len(jobs), 3)]
    for g in groups:  # the three arms of a group are adjacent and share everything but the arm
        assert len({j.pair for j in g}) == 1 and {j.arm for j in g} == {"plain", "suggest", "speculative"}
        assert len({j.seed for j in g}) == 1
    firsts = [g[0].arm for g in groups]
    assert firsts == ["plain", "suggest", "speculative"] * 2 + [
        "plain",
        "suggest",
    ]  # the starting arm rotates
    assert len({j.session_id for j in jobs}) == len(jobs)


def test_rep_seeds_of_neighbouring_run_seeds_do_not_overlap() -> None:
    s0 = {rep_seed(0, r) for r in range(30)}
    s1 = {rep_seed(1, r) for r in range(30)}
    assert len(s0) == 30 and not s0 & s1  # seed + rep made --seed 0 and --seed 1 share all but one rep
    assert rep_seed(0, 3) == rep_seed(0, 3)


def test_prepare_workspace_makes_a_committed_git_repo(tmp_path: Path) -> None:
    root = prepare_workspace(scenario("a"), tmp_path / "p")
    assert (root / "src/a.py").read_text() == "x = 1\n"
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
    )
    assert status.stdout == ""  # everything committed
    log = subprocess.run(["git", "log", "--oneline"], cwd=root, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 1


def test_a_scenarios_own_git_commit_works_for_a_user_without_a_git_identity(tmp_path: Path) -> None:
    """node-fix-overdue commits in a turn: as a user with no user.name/email (uid 65534, a CI account) git
    refused (exit 128) and every arm's turn failed, as root it took root's own identity."""
    root = prepare_workspace(scenario("a"), tmp_path / "p")
    (root / "src/a.py").write_text("x = 2\n")
    no_identity = {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    r = subprocess.run(
        ["git", "-c", "user.useConfigOnly=true", "commit", "-qam", "a turn's commit"],
        cwd=root,
        env=no_identity,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    log = subprocess.run(
        ["git", "log", "--format=%an <%ae>"], cwd=root, capture_output=True, text=True, check=True
    )
    assert log.stdout.splitlines() == ["speculate-bench <bench@localhost>"] * 2


def test_manifest_sees_content_mode_deletion_symlink_and_empty_dir_changes(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    f = tmp_path / "d" / "f.txt"
    f.write_text("one")
    base = manifest(tmp_path)
    assert changed(base, manifest(tmp_path)) == [] and tree_hash(base) == tree_hash(manifest(tmp_path))
    f.write_text("two")
    assert changed(base, manifest(tmp_path)) == ["d/f.txt"]
    f.write_text("one")
    os.chmod(f, 0o755)
    assert changed(base, manifest(tmp_path)) == ["d/f.txt"]
    os.chmod(f, 0o644)
    base = manifest(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to("d/f.txt")
    assert changed(base, manifest(tmp_path)) == ["empty/", "link"]
    f.unlink()
    assert "d/f.txt" in changed(base, manifest(tmp_path))
    assert tree_hash(base) != tree_hash(manifest(tmp_path))
