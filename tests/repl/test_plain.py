"""The REPL in line mode (stdin piped), run as a subprocess against the simulator demo: what a script
driving ``speculate repl`` sees, and what lands in the project."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from speculate.repl.demo import find_scenario, prepare_project
from speculate.sim.scenario_yaml import load_scenario
from speculate.tools import default_tools

REPO = Path(__file__).resolve().parents[2]


def repl(*args: str, stdin: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "speculate.cli", "repl", *args],
        input=stdin,
        text=True,
        capture_output=True,
        cwd=REPO,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "SPECULATE_HISTORY": str(tmp / "h")},
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return prepare_project(load_scenario(find_scenario("fix-pagination")), tmp_path / "proj")


def test_bad_options_name_the_input(tmp_path: Path) -> None:
    r = repl("--scenario", "no-such-scenario", stdin="", tmp=tmp_path)
    assert r.returncode == 2 and "no-such-scenario" in r.stderr and "fix-pagination" in r.stderr
    r = repl(
        str(tmp_path / "missing"),
        "--model",
        "anthropic",
        "--base-url",
        "http://127.0.0.1:9",
        stdin="",
        tmp=tmp_path,
    )
    assert r.returncode == 2 and "missing" in r.stderr
    r = repl("--time-scale", "0", stdin="", tmp=tmp_path)
    assert r.returncode == 2 and "--time-scale" in r.stderr
    (tmp_path / "file.py").write_text("x = 1\n")
    r = repl(str(tmp_path / "file.py"), stdin="", tmp=tmp_path)
    assert r.returncode == 2 and "file.py' is a file, not a project directory" in r.stderr
    typo = subprocess.run(
        [sys.executable, "-m", "speculate.cli", "benchh"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert typo.returncode == 2 and "unknown command 'benchh' (did you mean 'bench'?)" in typo.stderr
    assert not (tmp_path / "benchh").exists()


@pytest.mark.slow
def test_line_mode_without_speculation_runs_the_script(project: Path, tmp_path: Path) -> None:
    r = repl(
        str(project),
        "--scenario",
        "fix-pagination",
        "--time-scale",
        "0.02",
        "--no-spec",
        stdin="\t\n/accept\nmaybe\nalways\ny\n/spec\n/mode plan\n/bogus\n/quit\n",
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "[suggestion] why does page 2 of the product list repeat the last item of page 1?" in out
    assert "off-by-one" in out and "✓ Grep(def paginate)" in out
    assert "[suggestion] fix it and add a regression test" in out
    assert "Full suite" in out and "speculation accepted" not in out
    assert "speculative Bash" not in out  # no speculation, nothing to say about its sandbox
    # Permission prompts in line mode: an unclear answer asks again; Bash ran after "always" and "y".
    assert out.count("allow Bash(python -m pytest -q tests/test_pager.py)? [y/n/always]") == 2
    assert "allow Bash(python -m pytest -q)? [y/n/always] y" in out
    assert "speculation  off (/spec on|off)" in out and "permission mode plan" in out
    # The REPL's default for a fork's edits (no --spec-edits, no speculation.edits): asked about on acceptance.
    assert "  edits        ask: a fork's edit the live path would ask about is written into it" in out
    assert "unknown command '/bogus'" in out
    assert "test_pages_do_not_overlap" in (project / "tests/test_pager.py").read_text()
    assert out.rstrip().endswith("bye")


@pytest.mark.slow
def test_line_mode_accepts_a_speculation(project: Path, tmp_path: Path) -> None:
    # bypassPermissions: the fork's pytest runs would otherwise be asked about (on acceptance, or at the call
    # when accepted first), and how many questions that makes depends on how far the fork got.
    r = repl(
        str(project),
        "--scenario",
        "fix-pagination",
        "--time-scale",
        "0.02",
        "--mode",
        "bypassPermissions",
        stdin="/accept\n/accept\n/compact\n/stats\n",
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "speculation accepted" in r.stdout
    assert "conversation compacted: " in r.stdout and re.search(r"compactions +1\n", r.stdout)
    from speculate.speculation.sandbox_shell import bash_sandbox

    assert (
        r.stdout.count("speculative Bash: ") == 1 and f"speculative Bash: {bash_sandbox().line}" in r.stdout
    )
    assert "test_pages_do_not_overlap" in (project / "tests/test_pager.py").read_text()
    assert "items[start:end]" in (project / "src/shop/pager.py").read_text()
    assert "answered by an accepted speculation" in r.stdout


@pytest.mark.slow
def test_line_mode_shows_instructions_and_hook_output(project: Path, tmp_path: Path) -> None:
    (project / "CLAUDE.md").write_text("Run the tests with python -m pytest -q.\n")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "Grep",
                            "hooks": [{"type": "command", "command": "echo searching the code"}],
                        },
                        {"matcher": "Read", "hooks": [{"type": "command", "command": "echo no >&2; exit 3"}]},
                    ],
                    "Notification": [{"hooks": [{"type": "command", "command": "true"}]}],
                }
            }
        )
    )
    r = repl(
        str(project),
        "--scenario",
        "fix-pagination",
        "--time-scale",
        "0.02",
        "--no-spec",
        stdin="/memory\n/mcp\n\t\n/quit\n",
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert (
        "instructions: 1 file, ~10 tokens" in out and f"project  ~    10 tokens  {project}/CLAUDE.md" in out
    )
    assert "system prompt: static ~" in out and f"; {len(default_tools())} tools" in out
    assert "no MCP servers (.mcp.json)" in out
    assert "note: " in out and "hooks.Notification: speculate runs only" in out
    assert "↪ PreToolUse hook on Grep: searching the code" in out
    assert "⚠ PreToolUse hook `echo no >&2; exit 3` on Read failed (exit 3): no" in out
    assert "✓ Read(" in out  # a failing hook (not exit 2) does not stop the call


def test_a_malformed_settings_file_stops_the_repl_naming_file_and_key(project: Path, tmp_path: Path) -> None:
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        '{"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}'
    )
    r = repl(str(project), "--scenario", "fix-pagination", stdin="", tmp=tmp_path)
    assert r.returncode == 2
    assert (
        f"{project}/.claude/settings.json: hooks.Stop[0].hooks[0]: Value error, a command hook needs"
        in r.stderr
    )


@pytest.mark.slow
def test_an_off_script_prompt_is_explained_and_the_demo_goes_on(project: Path, tmp_path: Path) -> None:
    r = repl(
        str(project),
        "--scenario",
        "fix-pagination",
        "--time-scale",
        "0.02",
        "--mode",
        "bypassPermissions",
        stdin="/accept\nwhat does cart.py do?\n/accept\n",
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "'what does cart.py do?' is not in scenario 'fix-pagination'" in out
    assert "the next scripted prompt is 'fix it and add a regression test'" in out
    detour = out.split("(ANTHROPIC_API_KEY, or --base-url).")[-1]  # after the fallback answer
    assert "› fix it and add a regression test" in detour  # /accept: the demo offers it again
    assert "Full suite: 29 passed" in detour and detour.count("[simulator]") == 0


def test_own_project_on_the_simulator_says_what_it_can_do(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "main.py").write_text("print('hi')\n")
    r = repl(str(own), "--no-spec", stdin="hello\n", tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("answers only the prompts of its scenarios") == 1
    assert "--model anthropic" in r.stdout and "[simulator]" in r.stdout
