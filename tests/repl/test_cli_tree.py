"""Every subcommand on one argparse tree: generated help for each, "did you mean" for a mistyped
subcommand at any level, one-line errors for bad values; ``bench check --project DIR``; and the temporary
files of killed processes removed on the next start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speculate.cli import main
from speculate.tempfiles import KEEP_LOGS_S, clean_stale

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["stats", "--help"], "usage: speculate stats [-h] EVENTS.jsonl"),
        (["check-bash", "--help"], "usage: speculate check-bash"),
        (["sandbox", "--help"], "run       run a command as speculative Bash would"),
        (["sandbox", "run", "--help"], "--upper-bytes UPPER_BYTES"),
        (["sim", "--help"], "check     validate scenario files"),
        (["sim", "check", "--help"], "usage: speculate sim check [-h] SCENARIO.yaml [SCENARIO.yaml ...]"),
        (["bench", "check", "--help"], "--project DIR"),
        (["sim", "serve", "--help"], "--port PORT"),
        (["bench", "--help"], "--concurrency CONCURRENCY"),
        (["recover", "--help"], "usage: speculate recover [-h] [--abandon] [PROJECT]"),
        (["--help"], "check-bash"),
        (["help", "stats"], "usage: speculate stats"),
    ],
)
def test_each_subcommand_has_generated_help(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert expected in out, out
    assert "Entry for" not in out and '"""' not in out  # no docstrings as help


def test_repl_help_states_each_mode_and_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repl", "--help"]) == 0
    out = capsys.readouterr().out
    for mode in ("default", "acceptEdits", "bypassPermissions", "plan"):
        assert f"\n  {mode} " in out, out
    assert "The default is `default`; the simulator demo (no DIR, or --scenario) starts in acceptEdits" in out
    assert "--read-timeout S" in out and "(default 60)" in out and "--connect-timeout S" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["sim", "chek", "x"],
            "speculate sim: error: unknown subcommand 'chek' (did you mean 'check'?); choose from serve, check",
        ),
        (["sandbox", "rnu"], "unknown subcommand 'rnu' (did you mean 'run'?)"),
        (["sim", "serve", "--port", "99999"], "argument --port: 99999 is out of range: a port is 0 to 65535"),
        (["stats"], "the following arguments are required: EVENTS.jsonl"),
        (["benchh"], "unknown command 'benchh' (did you mean 'bench'?)"),
    ],
)
def test_bad_input_is_one_line_naming_it(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_a_group_without_its_subcommand_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim"]) == 2
    err = capsys.readouterr().err
    assert "serve     serve the simulator" in err and "check     validate" in err


SCN = """\
name: needs-the-project
turns:
  - prompt: "run the project's tool"
    steps:
      - tools:
          - Bash: {command: "cat marker.txt && project-tool"}
        expect: {exit_code: 0, contains: "tool ran"}
      - text: "Done."
"""


def test_bench_check_project_replays_on_a_copy_of_dir_with_the_callers_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scenario needs a file of the project and a command on the caller's PATH, as `repl DIR --scenario`
    has them: without --project the replay (a fresh workspace, the system PATH) meets neither."""
    scn = tmp_path / "s.yaml"
    scn.write_text(SCN)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "marker.txt").write_text("marker\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "project-tool").write_text("#!/bin/sh\necho tool ran\n")
    (bin_dir / "project-tool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert main(["bench", "check", str(scn)]) == 1
    assert "unmet expectation" in capsys.readouterr().out
    before = sorted(p.name for p in project.iterdir())
    assert main(["bench", "check", str(scn), "--project", str(project)]) == 0, capsys.readouterr()
    assert "all turns replayed as scripted" in capsys.readouterr().out
    assert sorted(p.name for p in project.iterdir()) == before  # DIR itself untouched
    assert main(["bench", "check", str(scn), "--project", str(tmp_path / "nope")]) == 2
    assert "--project" in capsys.readouterr().err


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_temporary_files_of_dead_processes_go_on_the_next_start(tmp_path: Path) -> None:
    dead, live = _dead_pid(), os.getpid()
    made = {
        f"speculate-spill-{dead}-abc": "dir",
        f"speculate-bench-{dead}-x1y2": "dir",
        f"speculate-repl-spill-{dead}-q": "dir",
        f"speculate-demo-{dead}-w": "dir",
        f"speculate-mcp-{dead}-empty.log": "",
        f"speculate-mcp-{dead}-kept.log": "server failed\n",
        f"speculate-spill-{live}-mine": "dir",
        "speculate-spill-oldstyle": "dir",
        "speculate-spill-newstyle": "dir",
        "speculate-bench-state-abcdefgh": "dir",
        "unrelated-123-x": "dir",
    }
    for name, kind in made.items():
        p = tmp_path / name
        if kind == "dir":
            (p / "project").mkdir(parents=True)
            (p / "project" / "a.txt").write_text("x")
        else:
            p.write_text(kind)
    old = time.time() - KEEP_LOGS_S - 60
    os.utime(tmp_path / "speculate-spill-oldstyle", (old, old))
    cleaned = clean_stale(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        [
            f"speculate-mcp-{dead}-kept.log",
            f"speculate-spill-{live}-mine",
            "speculate-spill-newstyle",
            "speculate-bench-state-abcdefgh",
            "unrelated-123-x",
        ]
    )
    assert (
        len(cleaned.paths) == 6
        and "removed 6 temporary files of speculate processes that are gone" in cleaned.line()
    )
    # A kept log goes after a day.
    os.utime(tmp_path / f"speculate-mcp-{dead}-kept.log", (old, old))
    assert [Path(p).name for p in clean_stale(tmp_path).paths] == [f"speculate-mcp-{dead}-kept.log"]


@pytest.mark.slow
def test_a_killed_repl_leaves_its_spill_dir_and_the_next_start_removes_it(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(REPO),
        "SPECULATE_HISTORY": str(tmp_path / "h"),
        "SPECULATE_STATE_DIR": str(tmp_path / "state"),
    }
    cmd = [sys.executable, "-m", "speculate.cli", "repl", "--plain", "--no-spec", "--time-scale", "0.02"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        end = time.monotonic() + 60
        while not any(x.name.startswith("speculate-repl-spill-") for x in tmp.iterdir()):
            assert time.monotonic() < end, "the REPL made no spill dir"
            time.sleep(0.05)
    finally:
        p.kill()
        p.communicate()
    left = sorted(x.name.split("-")[1] for x in tmp.iterdir())
    assert left == ["demo", "repl"], left  # SIGKILL: nothing could clean up
    r = subprocess.run(cmd, input="/quit\n", capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "removed 2 temporary files of speculate processes that are gone" in r.stdout
    assert list(tmp.iterdir()) == []
