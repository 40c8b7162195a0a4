"""``speculate sandbox run``: the command's output (shown, never interpreted by the terminal), a JSON summary
(with the environment variables passed), the project unchanged; bad input named."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from speculate.speculation.sandbox_shell import bash_sandbox
from tests.speculation.conftest import tree_hash


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "speculate.cli", "sandbox", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _summary(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("{\n") :])


def test_run_prints_output_and_changes_and_never_touches_the_project(tmp_path: Path) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("alpha\n")
    before = tree_hash(proj)
    r = _run(
        "run",
        "--project",
        str(proj),
        "--",
        "cat a.txt; echo b > b.txt; rm a.txt; touch /etc/x; exit 3",
        cwd=tmp_path,
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith("alpha\n")
    assert "Read-only file system" in r.stderr
    s = _summary(r.stdout)
    assert s["exit"] == 3 and s["backend"] in ("kernel", "fuse") and s["discarded"]
    assert {(c["path"], c["kind"]) for c in s["changes"]} == {("a.txt", "deleted"), ("b.txt", "added")}
    assert set(s["enforced"]) >= {"processes", "memory", "writes"}
    assert tree_hash(proj) == before


def test_limits_hit_are_reported(tmp_path: Path) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    r = _run(
        "run",
        "--upper-bytes",
        str(4 << 20),
        "--",
        "head -c 3000000 /dev/zero > a; sleep 0.3; head -c 3000000 /dev/zero > b; sleep 0.5; echo finished",
        cwd=tmp_path,
    )
    s = _summary(r.stdout)
    assert s["limit"] == "upper_bytes" and "finished" not in r.stdout and s["exit"] != 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--project", "/no/such/dir", "--", "true"], "/no/such/dir"),
        (["run", "--timeout", "0", "--", "true"], "--timeout"),
        (["run", "--upper-bytes", "0", "--", "true"], "upper_bytes"),
        (["run"], "no command given"),
        (["go"], "unknown subcommand 'go'; choose from run"),
    ],
)
def test_bad_input_is_named(args: list[str], message: str, tmp_path: Path) -> None:
    r = _run(*args, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr


def test_the_command_s_escape_sequences_are_shown_not_sent_to_the_terminal(tmp_path: Path) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    r = _run(
        "run",
        "--",
        "printf '\\033]52;c;aGk=\\007 \\033]8;;http://evil/\\033\\\\link\\033]8;;\\033\\\\ "
        "\\033[2J \\302\\233 2J done\\n'; printf '\\033]0;title\\007 err\\n' >&2",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    raw = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
    assert not raw.search(r.stdout) and not raw.search(r.stderr), (r.stdout, r.stderr)
    assert r.stdout.startswith("^[]52;c;aGk=^G ^[]8;;http://evil/^[\\link^[]8;;^[\\ ^[[2J <9b> 2J done\n")
    assert r.stderr.startswith("^[]0;title^G err")


def test_only_the_allow_listed_environment_and_the_settings_names_enter(tmp_path: Path) -> None:
    if not bash_sandbox().available:
        pytest.skip(f"speculative Bash is {bash_sandbox().line}")
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    (proj / ".claude" / "settings.json").write_text(json.dumps({"speculation": {"env": ["BUILD_FLAVOUR"]}}))
    secrets = {"DATABASE_URL": "postgres://u:hunter2@db/x", "MYSQL_PWD": "hunter2", "PASS": "hunter2"}
    r = _run(
        "run",
        "--project",
        str(proj),
        "--",
        "env",
        cwd=tmp_path,
        env={**secrets, "BUILD_FLAVOUR": "debug", "LC_TIME": "C", "VIRTUAL_ENV": "/opt/venv"},
    )
    assert r.returncode == 0, r.stderr
    assert "hunter2" not in r.stdout and "BUILD_FLAVOUR=debug" in r.stdout
    passed = _summary(r.stdout)["env"]
    assert {"BUILD_FLAVOUR", "LC_TIME", "VIRTUAL_ENV", "PATH"} <= set(passed) and not set(secrets) & set(
        passed
    )
    (proj / ".claude" / "settings.json").write_text(json.dumps({"speculation": {"env": ["BUILD-FLAVOUR"]}}))
    r = _run("run", "--project", str(proj), "--", "env", cwd=tmp_path)
    assert (
        r.returncode == 2 and "settings.json: speculation.env[0]" in r.stderr and "BUILD-FLAVOUR" in r.stderr
    )
