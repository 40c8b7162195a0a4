"""Provenance: the commit, whether the tree was dirty, the versions, the machine and the settings."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench import provenance
from bench.run_options import build_config, build_parser

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=ENV, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_commit_and_a_dirty_tree_are_recorded(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-q", "-m", "one")
    clean = provenance.source_state(tmp_path)
    assert clean["commit"] == git(tmp_path, "rev-parse", "HEAD") and clean["dirty"] is False
    (tmp_path / "a.py").write_text("x = 2\n")
    (tmp_path / "new.py").write_text("")
    dirty = provenance.source_state(tmp_path)
    assert dirty["dirty"] is True and dirty["dirty_paths"] == ["a.py", "new.py"]
    assert (
        provenance.source_state(tmp_path / "nowhere")["commit"] is None
    )  # not a repository: said, not guessed


def test_a_run_records_its_command_versions_machine_and_settings() -> None:
    argv = ["--quick", "--scenario", "fix-pagination", "--typing-cps", "3"]
    cfg = build_config(build_parser().parse_args(argv))
    p = provenance.finish(provenance.start(argv, cfg))
    assert p["command"] == "speculate bench --quick --scenario fix-pagination --typing-cps 3"
    assert p["versions"]["python"] and p["versions"]["anthropic"] and p["versions"]["kernel"]
    assert (
        p["machine"]["cpus"] >= 1 and len(p["machine"]["load_at_start"]) == 3 and p["machine"]["load_at_end"]
    )
    assert p["settings"]["scenarios"] == ["fix-pagination"] and p["settings"]["time_scale"] == 0.2
    (cond,) = p["settings"]["conditions"]
    assert (
        cond["typing_cps"] == 3.0
        and cond["think"]["median_s"] == 5.0
        and cond["label"].endswith("typing:3cps")
    )
