"""The pieces of issue #37 that need no terminal: paste placeholders, @mentions as Claude Code attaches them,
memory lines, the /diff view of ignored files, the toolbar's abstention and top-K lines and its cuts at a
word, the "did you mean" of a mistyped option, saved sessions, and the simulator off its script after a
refused call. (The tmux tests drive the same through a terminal.)

The attachment format was read off Claude Code 2.1.332's request to the embedded simulator:
``claude -p "explain @src/shop.py please"`` sent, before the prompt, a reminder ``Called the Read tool
with the following input: {"file_path":"/abs/src/shop.py"}`` and one ``Result of calling the Read tool:``
with ``1<tab>def f():`` lines (the trailing empty line numbered too), and the prompt text as typed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculate.cliparse import Parser, UsageError
from speculate.repl.commands import next_mode
from speculate.repl.diffview import summarise_ignored
from speculate.repl.inputs import Pastes, add_memory, attachment_blocks, bash_messages, mentions, stray_answer
from speculate.repl.render import approval_lines
from speculate.repl.resume import NoSession, find, listing, sessions_dir
from speculate.repl.status import Status, clip
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.script import Script
from speculate.speculation.approvals import PendingApproval
from speculate.speculation.effects import FileSummary
from speculate.speculation.events import SpecEvent
from speculate.transcript import Transcript


def test_a_large_paste_is_a_placeholder_until_the_line_is_sent() -> None:
    p = Pastes()
    assert p.add("small") == "small"
    big = "x\n" * 300
    shown = p.add(big)
    assert shown == "[Pasted text #1 +300 lines]"
    assert p.expand(f"look: {shown} please") == f"look: {big} please"
    assert p.add("y" * 900) == "[Pasted text #2]"  # one long line: collapsed, no line count
    assert p.expand("[Pasted text #9 +3 lines]") == "[Pasted text #9 +3 lines]"  # not ours: left as typed


def test_mentions_and_the_attachment_claude_code_sends(tmp_path: Path) -> None:
    assert mentions("explain @src/shop.py, then @README.md and @src/shop.py") == ["src/shop.py", "README.md"]
    assert mentions("mail me at a@b.c") == []  # not after a space: no mention
    f = tmp_path / "src" / "shop.py"
    called, result = attachment_blocks(f, "def f():\n    return 1\n")
    assert called == (
        "<system-reminder>\nCalled the Read tool with the following input: "
        f'{{"file_path":"{f}"}}\n</system-reminder>'
    )
    assert result == (
        "<system-reminder>\nResult of calling the Read tool:\n1\tdef f():\n2\t    return 1\n3\t\n</system-reminder>"
    )
    assert bash_messages("ls", "a\n", "") == [
        "<bash-input>ls</bash-input>",
        "<bash-stdout>a\n</bash-stdout><bash-stderr></bash-stderr>",
    ]


def test_memory_lines_append_and_answers_are_not_prompts(tmp_path: Path) -> None:
    md = tmp_path / "CLAUDE.md"
    md.write_text("# rules")
    add_memory(md, "  always use type hints ")
    add_memory(tmp_path / "sub" / "CLAUDE.local.md", "x")
    assert md.read_text() == "# rules\n- always use type hints\n"
    assert (tmp_path / "sub" / "CLAUDE.local.md").read_text() == "- x\n"
    assert all(stray_answer(w) for w in ("y", "N", "always ", "yes")) and not stray_answer("yes please")


def test_diff_summarises_what_git_ignores(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("*.log\n")

    def part(path: str) -> str:
        return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"

    diff = "".join(
        part(p)
        for p in (
            ".pytest_cache/v/cache/nodeids",
            "src/__pycache__/shop.cpython-311.pyc",
            "src/shop.py",
            "run.log",
        )
    )
    shown, line = summarise_ignored(tmp_path, diff)
    assert (
        "src/shop.py" in shown
        and ".pytest_cache" not in shown
        and "pyc" not in shown
        and "run.log" not in shown
    )
    assert (
        line.startswith("+ 3 files git ignores (") and ".pytest_cache/" in line and line.endswith("not shown")
    )
    assert summarise_ignored(tmp_path, part("src/shop.py")) == (part("src/shop.py"), "")


def test_the_toolbar_says_abstention_and_which_fork_of_how_many() -> None:
    st = Status(mode="default")
    st.update(SpecEvent("generating"))
    st.update(
        SpecEvent(
            "idle",
            None,
            {"abstained": True, "p_accept": 0.25, "expected_saving_s": 3.0, "expected_cost_usd": 0.0123},
        )
    )
    st.update(SpecEvent("idle"))  # the cycle's end does not erase what the policy decided
    assert (
        st.line()
        == "no fork: the policy abstained (P 25%, saves ~3.0s, costs ~$0.0123) │ saved 0.0s │ default"
    )
    st.update(SpecEvent("generating"))
    assert "abstained" not in st.line()
    st.update(
        SpecEvent("speculating", "b", {"tools_run": 1, "elapsed_s": 0.0, "rank": 1, "forks": 2}, at=5.0)
    )
    assert st.line(now=6.0) == "speculating (1 tool; candidate 2, 2 forks, 1.0s) │ saved 0.0s │ default"
    st.study = True  # in a study neither the state nor the time saved is shown
    assert st.line() == "study (/study: past turns' arms) │ default"


def test_a_cut_reason_ends_at_a_word_with_no_stray_comma() -> None:
    assert clip("needs permission, because the rule asks", 24) == "needs permission…"
    st = Status(state="boundary", boundary="bash: Bash pytest -q tests/test_pager.py, needs permission")
    words = {w.rstrip(",") for w in st.boundary.split()}
    for width in (30, 44, 52, 60):
        text = st.line(width=width)
        for ln in text.split("\n"):
            assert len(ln) <= width and ",…" not in ln and " …" not in ln
        before = text.split("…")[0] if "…" in text else ""
        if before and not before[-1].isspace():  # the word before the ellipsis is whole
            assert before.split()[-1].lstrip("(") in words, text


def test_a_mistyped_option_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    root = Parser(prog="speculate")
    sub = root.add_subparsers(dest="cmd", parser_class=Parser)
    repl = sub.add_parser("repl", prog="speculate repl")
    repl.add_argument("--mode")
    with pytest.raises(UsageError):
        root.parse_args(["repl", "--mdoe", "plan"])
    err = capsys.readouterr().err
    assert "usage: speculate repl" in err and "did you mean '--mode'?" in err


def test_saved_sessions_are_found_by_id_or_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECULATE_STATE_DIR", str(tmp_path / "state"))
    proj = tmp_path / "proj"
    proj.mkdir()
    with pytest.raises(NoSession, match="no saved session"):
        find(proj, None)
    d = sessions_dir(proj)
    for i, name in enumerate(("20260101-000000-aaaaaa", "20260102-000000-bbbbbb")):
        with Transcript(d / f"{name}.jsonl") as t:
            t.write("repl", mode="plan")
            t.message({"role": "user", "content": [{"type": "text", "text": f"prompt {i}"}]})
            t.message({"role": "assistant", "content": [{"type": "text", "text": "answer"}]})
    (d / "20260103-000000-cccccc.jsonl").write_text("")  # a session that never finished a turn
    newest = find(proj, None)
    assert newest.id == "20260102-000000-bbbbbb" or newest.id == "20260101-000000-aaaaaa"
    assert find(proj, "aaaaaa").prompts == ["prompt 0"] and find(proj, "aaaaaa").mode == "plan"
    with pytest.raises(NoSession, match=r"'zzz'.*saved: "):
        find(proj, "zzz")
    assert "2 prompts" not in listing(proj) and "1 prompt " in listing(proj)


SCEN = """
name: deny
turns:
  - prompt: run the tests
    steps:
      - tools:
          - Bash: {command: pytest -q}
      - text: All 31 passed.
"""


def test_a_refused_call_takes_the_simulator_off_its_script() -> None:
    script = Script([parse_scenario(SCEN)])
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}}

    def body(result: dict[str, object]) -> dict[str, object]:
        return {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "run the tests"}]},
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", **result}]},
            ]
        }

    ran = script.reply(body({"content": "31 passed in 0.2s"}))
    assert json.dumps(ran.content).count("All 31 passed") == 1
    denied = script.reply(
        body({"content": "Permission denied: the user declined this call", "is_error": True})
    )
    text = denied.content[0]["text"]
    assert "All 31 passed" not in text and text.startswith("[simulator] The call was not run")
    assert "the user declined this call" in text and denied.source.startswith("fallback")


def test_the_acceptance_question_counts_ignored_files_instead_of_listing_them(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    written = [".pytest_cache/v/cache/nodeids", "src/__pycache__/shop.cpython-311.pyc", "src/shop.py"]
    p = PendingApproval(
        "Bash",
        "Bash(pytest -q)",
        "pytest -q",
        "asks",
        "t1",
        files=FileSummary(written=written),
        finished=True,
    )
    line = approval_lines([p], tmp_path)[1]
    assert (
        line
        == "  Bash(pytest -q) → wrote src/shop.py; + 2 files git ignores (.pytest_cache/, src/__pycache__/)"
    )
    assert ".pyc" in approval_lines([p])[1]  # without the project nothing is hidden
    p.files = FileSummary(written=written[:2])  # a test run: only caches
    assert approval_lines([p], tmp_path)[1].endswith(
        "→ wrote 2 files git ignores (.pytest_cache/, src/__pycache__/)"
    )


def test_shift_tab_cycles_the_modes_as_claude_code() -> None:
    # Claude Code 2.1.332's cycle (its _Bt function): default, acceptEdits, plan, then bypassPermissions only
    # where it is available, and dontAsk goes back to default.
    seq, mode = [], "default"
    for _ in range(4):
        mode = next_mode(mode)
        seq.append(mode)
    assert seq == ["acceptEdits", "plan", "default", "acceptEdits"]
    assert (
        next_mode("plan", bypass=True) == "bypassPermissions" and next_mode("bypassPermissions") == "default"
    )
    assert next_mode("dontAsk") == "default"
