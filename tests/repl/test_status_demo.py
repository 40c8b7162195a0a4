"""The toolbar's state reducer and the simulator demo's project set-up and script position."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from speculate.repl.controller import format_stats
from speculate.repl.demo import Demo, DemoError, find_scenario, needs_git, prepare_project
from speculate.repl.status import Status
from speculate.sim.scenario_yaml import load_scenario, parse_scenario
from speculate.speculation.events import SpecEvent


def test_toolbar_follows_the_speculation_states() -> None:
    st = Status(mode="default")
    assert st.line().startswith("idle")
    st.update(SpecEvent("generating"))
    assert "generating suggestion" in st.line()
    st.update(SpecEvent("speculating", "fix it", {"tools_run": 0, "elapsed_s": 0.0}, at=100.0))
    st.update(SpecEvent("speculating", "fix it", {"tools_run": 2, "elapsed_s": 1.0}, at=101.0))
    assert st.line(now=102.5) == "speculating (2 tools, 2.5s) │ saved 0.0s │ default"
    st.update(
        SpecEvent(
            "boundary",
            "fix it",
            {"boundary": "bash", "detail": "rm -rf build", "tools_run": 3, "elapsed_s": 3.25},
        )
    )
    assert st.line(now=999.0).startswith("stopped at boundary (bash: rm -rf build)")
    st.update(SpecEvent("accepted", "fix it", {"time_saved_s": 3.0}))
    st.update(SpecEvent("generating"))
    st.update(SpecEvent("speculating", "next", {"tools_run": 1, "elapsed_s": 0.5}, at=10.0))
    st.update(SpecEvent("ready", "next", {"tools_run": 1, "elapsed_s": 0.75}))
    assert st.line(now=50.0) == "ready (1 tool, 0.8s) - Tab to accept │ saved 3.0s │ default"
    st.spec_on, st.busy = False, True
    assert st.line() == "working │ speculation off │ saved 3.0s │ default"


def test_a_boundary_s_command_is_shown_not_interpreted_in_the_toolbar() -> None:
    st = Status(mode="default")
    st.update(SpecEvent("boundary", "x", {"boundary": "bash", "detail": "printf '\x1b]0;pwned\x07'\x9b2J"}))
    assert st.line().startswith("stopped at boundary (bash: printf '^[]0;pwned^G'<9b>2J)")
    assert "\x1b" not in st.line(width=30) and "\x9b" not in st.line(width=30)


def test_format_stats_one_set_of_names_and_formats() -> None:
    out = format_stats(
        {
            "turns": 3,
            "accepted_turns": 1,
            "acceptance_rate": 0.75,
            "time_saved_s": 12.345,
            "boundaries": {"bash": 2},
            "suggestion_outcomes": {"accepted": 1, "ignored": 2},
            "speculation_outcomes": {"accepted": 1},
            "cost_usd": 0.01234,
            "suggestion_cost_usd": 0.002,
            "speculation_cost_usd": 0.01034,
            "wasted_speculation_cost_usd": 0.004,
        }
    )
    assert "3 (1 answered by an accepted speculation)" in out and "ignored 2, accepted 1" in out
    assert "75% of those shown taken" in out and "12.3s" in out and "bash 2" in out
    assert "0.7500" not in out and "=" not in out
    # Suggestions and speculations apart, each with its own spend (not one "cost" over both).
    rows = out.splitlines()
    sugg = next(i for i, r in enumerate(rows) if r.strip().startswith("suggestions"))
    spec = next(i for i, r in enumerate(rows) if r.strip().startswith("speculations"))
    assert (
        "$0.0020" in "".join(rows[sugg:spec]) and "$0.0103 on forks, $0.0040 of it on forks not used" in out
    )
    assert "cost " not in out


def test_toolbar_fits_the_width_and_shortens_paths() -> None:
    st = Status(state="boundary", boundary="edit: Edit /tmp/a/b/proj/tests/test_pager.py needs permission")
    full = st.line()
    assert "/tmp/a/b/proj/tests/test_pager.py" in full and len(full) > 60
    short = st.line(width=60)  # the path shortened, then the stop reason wrapped onto a second line, whole
    first, second = short.split("\n")
    assert short == (
        "stopped at boundary (edit: Edit …/tests/test_pager.py needs\npermission) │ saved 0.0s │ acceptEdits"
    )
    assert len(first) <= 60 and len(second) <= 60
    tiny = st.line(width=30)  # only what fits in no two lines is cut
    assert all(len(ln) <= 30 for ln in tiny.split("\n")) and "…" in tiny and tiny.endswith("acceptEdits")
    assert "tests/test_pager.py" in st.line(width=90) and "/tmp/a" not in st.line(width=90)
    st.set_speculation(True)
    assert st.line() == "idle │ saved 0.0s │ acceptEdits"  # not the last speculation's state


def test_find_scenario_by_name_and_clear_error() -> None:
    assert load_scenario(find_scenario("fix-pagination")).name == "fix-pagination"
    with pytest.raises(DemoError, match=r"no bundled scenario named 'nope'.*fix-pagination"):
        find_scenario("nope")
    with pytest.raises(DemoError, match=r"missing\.yaml"):
        find_scenario("missing.yaml")


def _scenario(command: str) -> str:
    return f"""
name: t
files: {{"a.txt": "hello\\n"}}
turns:
  - prompt: "one"
    steps:
      - tools:
          - Bash: {{command: "{command}"}}
      - text: "done"
    suggestion: "two"
  - prompt: "two"
    steps:
      - text: "ok"
"""


def test_needs_git_looks_at_scripted_commands() -> None:
    assert needs_git(parse_scenario(_scenario("git status --short")))
    assert needs_git(parse_scenario(_scenario("make && git commit -qm x")))
    assert not needs_git(parse_scenario(_scenario("python -m pytest -q tests/test_digit.py")))


def test_prepare_project_inits_git_when_needed(tmp_path: Path) -> None:
    root = prepare_project(parse_scenario(_scenario("git status")), tmp_path / "p")
    assert (root / "a.txt").read_text() == "hello\n"
    log = subprocess.run(["git", "log", "--oneline"], cwd=root, capture_output=True, text=True, check=True)
    assert "initial" in log.stdout
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True)
    assert status.stdout == ""
    plain = prepare_project(parse_scenario(_scenario("ls")), tmp_path / "q")
    assert not (plain / ".git").exists()
    with pytest.raises(DemoError, match="not empty"):
        prepare_project(parse_scenario(_scenario("ls")), root)


def test_demo_follows_prompts_and_suggestions() -> None:
    sc = parse_scenario(
        _scenario("ls").replace(
            'suggestion: "two"', 'suggestion: "2"\n    suggestion_steps:\n      - text: two-ish'
        )
    )
    d = Demo(sc)
    assert d.next_prompt() == "one"
    d.submitted("something else")
    assert d.next_prompt() == "one"
    d.submitted("one")
    assert d.next_prompt() == "two"
    d.submitted("2")  # the previous turn's suggestion also matches the turn
    assert d.next_prompt() is None
    d.cleared()
    assert d.next_prompt() == "one"


def test_the_accepted_line_names_files_summarises_caches_and_fits() -> None:
    from speculate.repl.controller import accepted_line

    written = [
        ".pytest_cache/v/cache/nodeids",
        ".benchmarks/x.json",
        "src/shop/__pycache__/pager.pyc",
        "src/shop/pager.py",
        "tests/test_pager.py",
    ]
    wide = accepted_line(written, 1, 2.34, 160)
    assert wide == (
        "⚡ speculation accepted: 1 tool ran ahead, saved 2.3s, wrote src/shop/pager.py, "
        "tests/test_pager.py; 3 in caches (.benchmarks, .pytest_cache, __pycache__)"
    )
    for width in (120, 90, 70):
        line = accepted_line(written, 5, 2.34, width)
        assert len(line) < width and "5 tools" in line and ".pytest_cache/" not in line, line


def test_the_accepted_line_says_deleted_and_renamed_for_what_they_are() -> None:
    from speculate.repl.controller import accepted_line

    line = accepted_line(
        ["src/new.py", "build/__pycache__/x.pyc"], 2, 1.0, 160, deleted=["build/"], renamed=["a.py -> b.py"]
    )
    assert line == (
        "⚡ speculation accepted: 2 tools ran ahead, saved 1.0s, deleted build/, renamed a.py → b.py, "
        "wrote src/new.py; 1 in caches (__pycache__)"
    )
    assert "wrote build" not in accepted_line([], 1, 0.5, 80, deleted=["build/"])
    narrow = accepted_line(
        [f"f{i}.py" for i in range(20)], 1, 0.5, 100, deleted=[f"d{i}/" for i in range(20)]
    )
    assert len(narrow) < 100 and "deleted d0/, d1/" in narrow and "more, wrote 20 files" in narrow, narrow


def test_the_approval_lines_name_each_call_and_what_it_changed() -> None:
    from overlayfs.changes import Change
    from speculate.repl.render import approval_lines
    from speculate.speculation.approvals import PendingApproval
    from speculate.speculation.effects import summarize

    rm = PendingApproval(
        "Bash",
        "Bash(rm -rf build)",
        "rm -rf build",
        "asks",
        "t1",
        finished=True,
        files=summarize([Change("build", "deleted", "dir"), Change("build/out.o", "deleted")]),
    )
    test = PendingApproval(
        "Bash",
        "Bash(make test)",
        "make test",
        "asks",
        "t2",
        files=summarize([Change(".pytest_cache/v", "added")]),
    )
    lines = approval_lines([rm, test, rm])
    assert lines[0] == "the speculation ran 2 calls you would have been asked about:"
    assert lines[1] == "  Bash(rm -rf build) → deleted build/"
    assert lines[2] == "  Bash(make test) → wrote .pytest_cache/v (so far: it was still running)"
    assert "always: also allow these commands" in lines[3]


def test_the_toolbar_says_how_many_calls_accepting_will_ask_about() -> None:
    s = Status()
    s.update(SpecEvent("ready", "x", {"tools_run": 2, "elapsed_s": 1.0, "approvals": 1}))
    assert "ready (2 tools, 1.0s, 1 to approve) - Tab to accept" in s.line()
    s.update(SpecEvent("generating", None))
    s.update(SpecEvent("boundary", "x", {"boundary": "edit", "detail": "Edit a", "approvals": 2}))
    assert "stopped at boundary (edit: Edit a); 2 to approve" in s.line()


def test_a_hooks_audit_log_is_named_not_counted_as_a_cache() -> None:
    from speculate.repl.render import accepted_line

    line = accepted_line(["src/a.py", ".audit/hook.log", ".pytest_cache/v/x"], 2, 1.0, 160)
    assert line.endswith("wrote .audit/hook.log, src/a.py; 1 in caches (.pytest_cache)"), line
