"""The REPL's pure renderers: a call's body (collapsed output, an edit's diff), the permission question
(every argument, the diff a Write/Edit would make, what ``always`` allows), the live line under a turn,
type-ahead after a cancel, and what a cancelled turn says."""

from __future__ import annotations

from prompt_toolkit.input.vt100_parser import Vt100Parser
from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.keys import Keys

from speculate.agent_types import ToolFinished
from speculate.repl.render import cancelled_line
from speculate.repl.terminal import unsent
from speculate.repl.toolview import body_lines, coloured_diff, full_call, question_lines, tool_body
from speculate.repl.turnline import TurnLine, typed_ahead
from speculate.speculation.accept import Landing
from speculate.speculation.effects import FileSummary
from speculate.term import render


def text(lines: list) -> list[str]:
    return [render(ln, color=False) for ln in lines]


def test_output_is_collapsed_to_its_first_lines_and_kept_whole_for_last() -> None:
    out = "\n".join(f"line {i}" for i in range(10))
    body = tool_body(ToolFinished("t", "Bash", "Bash(seq 10)", False, 0.1, out))
    assert text(body_lines(body)) == [
        "  ⎿  line 0",
        "     line 1",
        "     line 2",
        "     line 3",
        "     … +6 lines (ctrl+o or /last to expand)",
    ]
    assert len(body.full) == 10
    quiet = tool_body(ToolFinished("t", "Bash", "Bash(true)", False, 0.1, ""))
    assert text(body_lines(quiet)) == ["  ⎿  (no output)"]
    read = tool_body(ToolFinished("t", "Read", "Read(a)", False, 0.1, "a\nb\nc"))
    assert text(body_lines(read)) == ["  ⎿  read 3 lines (ctrl+o or /last to expand)"] and read.hidden == 3


def test_an_edit_shows_as_a_coloured_diff() -> None:
    ev = ToolFinished(
        "t",
        "Edit",
        "Edit(a.py)",
        False,
        0.1,
        "ok",
        input={"file_path": "a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"},
    )
    lines = body_lines(tool_body(ev))
    assert text(lines) == ["  ⎿   x = 1", "     -y = 2", "     +y = 3"]
    shown = render(lines[1], color=True)
    assert "\x1b[31m-y = 2\x1b[0m" in shown
    assert render(coloured_diff("@@ -1 +1 @@\n+new")[1], color=True) == "\x1b[32m+new\x1b[0m"


def test_the_question_shows_every_argument_the_diff_and_what_always_allows(tmp_path) -> None:
    assert (
        full_call("mcp__notes__word_count", {"text": "two words"})
        == 'mcp__notes__word_count(text="two words")'
    )
    assert full_call("Bash", {"command": "pytest -q", "timeout": 60}) == "Bash(pytest -q, timeout=60)"
    current = "a\nb\nc\n"
    lines = text(
        question_lines(
            "Edit",
            {"file_path": "/p/f.py", "old_string": "b", "new_string": "B"},
            "Edit",
            lambda path: current if path == "/p/f.py" else None,
        )
    )
    assert lines[0] == "  Edit(/p/f.py)"
    assert lines[1:5] == ["    @@ -1,3 +1,3 @@", "     a", "    -b", "    +B"]
    assert lines[-1] == "  always: allow every Edit call for the rest of this session (rule Edit); Esc: no"
    new = text(question_lines("Write", {"file_path": "/p/n.py", "content": "x\n"}, "Write", lambda p: None))
    assert new[1:3] == ["    @@ -0,0 +1 @@", "    +x"]
    bash = text(question_lines("Bash", {"command": "make"}, "Bash(make)", lambda p: None))
    assert bash[-1] == "  always: allow this command for the rest of this session (rule Bash(make)); Esc: no"


def test_the_live_line_fits_and_shows_typeahead() -> None:
    line = TurnLine(started=100.0)
    line.tool_started("Bash(python -m pytest -q tests/test_pager.py)")
    line.response_done(1234)
    shown = render(line.render(120, "y\x7fyes\r", now=103.4), color=False)
    assert "Bash(python -m pytest -q tests/test_pager.py)… (3s · ↓ 1.2k tokens · esc to interrupt)" in shown
    assert shown.endswith("  › yes⏎") and len(shown) <= 119
    narrow = render(line.render(60, now=103.4), color=False)  # the tool's summary gives way first
    assert len(narrow) <= 59 and narrow.endswith("p… (3s · ↓ 1.2k tokens · esc to interrupt)"), narrow
    assert typed_ahead("ab\x1b[Dc\x15de") == "de"


def test_keys_typed_during_a_cancelled_turn_stay_but_are_not_sent() -> None:
    presses: list[KeyPress] = []
    parser = Vt100Parser(presses.append)
    parser.feed("y\rnext\r\r")
    parser.flush()
    kept = unsent(presses)
    assert [p.key for p in kept] == ["y", Keys.ControlJ, "n", "e", "x", "t"]


def test_a_cancelled_turn_says_what_landed() -> None:
    assert cancelled_line(None, []) == "turn cancelled; the session goes on"
    assert "files edited before the cancel stay as they are: a.py" in cancelled_line(None, ["a.py", "a.py"])
    landed = Landing("fix it", promoted=True, files=FileSummary(["a.py"], [], []))
    assert cancelled_line(landed, []).startswith(
        "turn cancelled: the accepted speculation had landed (wrote a.py)"
    )
    assert "nothing of the accepted speculation was applied" in cancelled_line(Landing("fix it"), [])
    assert "discarded, nothing of it was applied" in cancelled_line(
        Landing("x", dropped="conflict"), ["b.py"]
    )


def test_streamed_model_text_wraps_at_word_boundaries_on_a_narrow_terminal(monkeypatch) -> None:
    import io

    import speculate.repl.output as output

    monkeypatch.setattr(output, "columns", lambda: 21)

    class Terminal:
        color = True

    out = io.StringIO()
    w = output.Output(out)
    w.fe = Terminal()
    for delta in ("The quick bro", "wn fox jumps over the la", "zy dog and keeps running\nnew line here ok"):
        w._stream(delta)
    w._write("\n")
    assert (
        out.getvalue()
        == "The quick brown fox\njumps over the lazy\ndog and keeps\nrunning\nnew line here ok\n"
    )
