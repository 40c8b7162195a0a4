"""The README's headline numbers are the kept run's: the block equals what bench/headline/summary.json gives."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import headline


def test_readme_headline_matches_the_kept_summary() -> None:
    if not (headline.HEADLINE_DIR / "summary.json").exists():
        pytest.skip("no kept headline run")
    kept = headline.load()
    assert headline.current_block(headline.README.read_text(encoding="utf-8")) == headline.readme_block(*kept)


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, Any]:
    """A repository with a main line (two commits) and a side branch off its first commit."""
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    _git(r, "commit", "-q", "--allow-empty", "-m", "one")
    first = _git(r, "rev-parse", "HEAD")
    _git(r, "checkout", "-q", "-b", "side")
    _git(r, "commit", "-q", "--allow-empty", "-m", "side")
    side = _git(r, "rev-parse", "HEAD")
    _git(r, "checkout", "-q", "main")
    _git(r, "commit", "-q", "--allow-empty", "-m", "two")
    return {"path": r, "first": first, "side": side, "head": _git(r, "rev-parse", "HEAD")}


def run_dir(
    tmp_path: Path, *, commit: str | None, dirty: bool = False, errors: int = 0, provenance: bool = True
) -> Path:
    """A finished run's directory: a summary with provenance, and raw records."""
    d = tmp_path / f"run-{commit}-{dirty}-{errors}-{provenance}"
    d.mkdir()
    s: dict[str, Any] = {
        "run_id": d.name,
        "run": {"sessions": 3, "failures": [], "interrupted": False, "wall_s": 60.0},
        "leaks": 0,
        "turn_errors": [{"session": "x", "turn": 1, "error": "unmet"}] * errors,
    }
    if provenance:
        s["provenance"] = {
            "commit": commit,
            "dirty": dirty,
            "dirty_paths": ["bench/x.py"] if dirty else [],
            "command": "speculate bench --quick",
            "versions": {},
            "machine": {},
        }
    (d / "summary.json").write_text(json.dumps(s))
    (d / "turns.jsonl").write_text('{"turn": 0}\n' * 100)
    (d / "events.jsonl").write_text('{"kind": "speculation"}\n')
    return d


def test_a_clean_run_of_an_ancestor_commit_is_kept_with_its_raw_records(
    tmp_path: Path, repo: dict[str, Any]
) -> None:
    src = run_dir(tmp_path, commit=repo["first"])
    dest = tmp_path / "kept"
    assert headline.keep(src, dest, repo=repo["path"]) == []
    assert json.loads((dest / "summary.json").read_text())["run_id"] == src.name
    with gzip.open(dest / "turns.jsonl.gz", "rt") as f:
        assert f.read() == (src / "turns.jsonl").read_text()  # re-analysable: the raw records, whole
    assert (dest / "turns.jsonl.gz").stat().st_size < (src / "turns.jsonl").stat().st_size
    assert (dest / "events.jsonl.gz").exists()
    assert (
        dest / "command.txt"
    ).read_text() == f"speculate bench --quick   # at commit {repo['first'][:12]}\n"
    assert json.loads((dest / "kept.json").read_text())["forced"] == []


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"errors": 2}, "2 turn error(s)"),
        ({"dirty": True}, "made from a dirty tree (bench/x.py)"),
        ({"commit": "side"}, "is not an ancestor of HEAD"),
        ({"commit": "f" * 40}, "commit ffffffffffff is not in this repository"),
        ({"commit": None}, "no commit recorded"),
        ({"provenance": False}, "no provenance"),
    ],
)
def test_a_run_that_cannot_be_traced_or_failed_is_refused_unless_forced(
    tmp_path: Path, repo: dict[str, Any], kw: dict[str, Any], reason: str
) -> None:
    args = {"commit": repo["head"], **kw}
    if args["commit"] in ("side",):
        args["commit"] = repo["side"]
    src = run_dir(tmp_path, **args)
    dest = tmp_path / "kept"
    with pytest.raises(headline.Refused, match=re.escape(reason)):
        headline.keep(src, dest, repo=repo["path"])
    assert not dest.exists()  # nothing kept
    forced = headline.keep(src, dest, force=True, repo=repo["path"])
    assert any(reason in p for p in forced)
    assert json.loads((dest / "kept.json").read_text())["forced"] == forced


def test_the_readme_block_says_when_a_run_was_kept_with_force() -> None:
    s = json.loads((headline.HEADLINE_DIR / "summary.json").read_text(encoding="utf-8"))
    s["provenance"] = {
        "commit": "a" * 40,
        "dirty": True,
        "command": "speculate bench",
        "versions": {"python": "3.11.7", "speculate": "0.1.0", "anthropic": "2.14.0", "kernel": "6.1"},
        "machine": {"load_at_start": [2.0, 1.0, 1.0], "load_at_end": [3.0, 2.0, 1.0]},
    }
    block = headline.readme_block(s, "speculate bench", kept={"forced": ["made from a dirty tree (x)"]})
    assert "**Kept with `--force` despite: made from a dirty tree (x).**" in block
    assert (
        "Python 3.11.7, speculate 0.1.0, anthropic 2.14.0, kernel 6.1; load average 2.0 at start, 3.0 at end"
        in block
    )
    assert "**Kept with `--force`" not in headline.readme_block(s, "speculate bench", kept={"forced": []})


def test_headline_main_refuses_with_exit_1_and_names_the_reason(
    tmp_path: Path, repo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    src = run_dir(tmp_path, commit=repo["head"], errors=1)
    assert headline.main([str(src)]) == 1  # ROOT's repository: refused for the turn error before any write
    assert "1 turn error(s)" in capsys.readouterr().err
