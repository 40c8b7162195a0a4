"""A transcript becomes a scenario that replays: prompts, steps, expectations, the starting tree, accepted
suggestions and recorded pauses; the replay (``speculate bench check``: the agent's real tools against the
simulator serving the imported scenario) meets every expectation."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.check import check_main
from speculate.importers.claude_code import ImportConfig, import_sessions
from speculate.importers.render import INTERRUPTED_TEXT
from speculate.sim.scenario_yaml import load_scenario
from tests.importers.cc_records import Transcript, bash_turn, edit_turn, read_result, read_turn, text, use

A_PY = "x = 1\nprint('hello world')\n"


def session(cwd: str) -> Transcript:
    """Three turns: read and search; (taken from the suggestion) edit, run, create a file; (typed) thanks."""
    t = Transcript(cwd=cwd)
    t.prompt("why does a.py greet the world?")
    read_turn(t, "m1", "t1", "a.py", A_PY)
    t.message("m2", text("Let me search too."), use("t2", "Grep", pattern="hello", path="."), stop="tool_use")
    t.result("t2", "Found 1 file\na.py", {"mode": "files_with_matches", "filenames": ["a.py"], "numFiles": 1})
    t.at(1).message("m3", text("It prints 'hello world' on purpose."))
    t.turn_end()
    t.at(6).prompt("greet there instead", source="suggestion_accepted")
    edit_turn(t, "m4", "t3", "a.py", A_PY, "hello world", "hello there")
    bash_turn(t, "m5", "t4", "python3 a.py", "hello there\n")
    t.message(
        "m6", use("t5", "Write", file_path=f"{cwd}/notes/b.txt", content="greets there\n"), stop="tool_use"
    )
    t.result(
        "t5",
        f"File created successfully at: {cwd}/notes/b.txt",
        {"type": "create", "filePath": f"{cwd}/notes/b.txt", "content": "greets there\n"},
    )
    t.at(1).message("m7", text("Done: it greets there."))
    t.turn_end()
    t.at(3).prompt("thanks")
    t.at(1).message("m8", text("You're welcome."))
    return t


def imported(tmp_path: Path, t: Transcript, **cfg: Any) -> tuple[Path, dict[str, Any]]:
    src = t.write(tmp_path / "transcripts" / "s.jsonl")
    res = import_sessions(ImportConfig(paths=(src.parent,), out=tmp_path / "out", **cfg))
    (path,) = res.written
    return path, yaml.safe_load(path.read_text())


def replay(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = check_main([str(path), "--time-scale", "0.01"])
    return code, capsys.readouterr().out


def test_a_session_becomes_a_scenario_that_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = str(tmp_path / "proj")
    path, doc = imported(tmp_path, session(cwd))
    assert path.name == "cc-proj-5e55104e.yaml"
    assert doc["files"] == {"a.py": A_PY}  # from the Read; notes/b.txt did not exist (a creating Write)
    t0, t1, t2 = doc["turns"]
    assert [t["prompt"] for t in doc["turns"]] == [
        "why does a.py greet the world?",
        "greet there instead",
        "thanks",
    ]
    assert t0["suggestion"] == "greet there instead"  # the user took it with Tab
    assert t1["suggestion"] is None  # "thanks" was typed
    assert "pause_s" not in t0 and t1["pause_s"] == pytest.approx(6.0) and t2["pause_s"] == pytest.approx(3.0)
    read, grep, answer = t0["steps"]
    assert read == {
        "tools": [{"Read": {"file_path": "{root}/a.py"}}],
        "expect": {"exit_code": 0, "contains": "print('hello world')"},
    }
    assert (
        grep["tools"] == [{"Grep": {"pattern": "hello", "path": "."}}] and "expect" not in grep
    )  # tree unknown
    assert answer == {"text": "It prints 'hello world' on purpose."}
    edit, bash, write, done = t1["steps"]
    assert edit["expect"] == {"exit_code": 0}
    assert bash["tools"] == [{"Bash": {"command": "python3 a.py", "description": "run it"}}]
    assert "expect" not in bash  # without --repo the rest of the tree is unknown: commands are not checked
    assert write == {
        "tools": [{"Write": {"file_path": "{root}/notes/b.txt", "content": "greets there\n"}}],
        "expect": {"exit_code": 0},
    }
    assert done == {"text": "Done: it greets there."}
    code, out = replay(path, capsys)
    assert code == 0, out
    assert "all turns replayed as scripted" in out


def test_with_repo_commands_are_checked_against_the_named_revision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "proj"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    (repo / "a.py").write_text(A_PY)
    (repo / "other.txt").write_text("not read in the session\n")
    git("add", "-A")
    git("commit", "-qm", "start")
    first = git("rev-parse", "HEAD")
    (repo / "a.py").write_text("print('hello mars')\n")
    git("commit", "-qam", "later")
    path, doc = imported(tmp_path, session(str(repo)), repo=repo, rev=first)
    assert doc["workspace"] == f"proj-{first[:12]}" and "files" not in doc
    ws = tmp_path / "out" / "workspaces" / doc["workspace"]
    assert (ws / "other.txt").read_text() == "not read in the session\n" and (ws / "a.py").read_text() == A_PY
    bash = doc["turns"][1]["steps"][1]
    assert bash["expect"] == {"exit_code": 0, "contains": "hello there"}
    assert doc["turns"][0]["steps"][1]["expect"] == {"exit_code": 0}  # the Grep: the tree is known
    code, out = replay(path, capsys)
    assert code == 0, out
    # The expectations are real: against the later revision the Read shows other content
    path2, _ = imported(tmp_path / "later", session(str(repo)), repo=repo, rev="HEAD")
    code, out = replay(path2, capsys)
    assert code == 1 and "unmet expectation" in out


def test_tool_inputs_become_speculates_and_what_cannot_be_scripted_is_dropped(tmp_path: Path) -> None:
    cwd = str(tmp_path / "proj")
    t = Transcript(cwd=cwd)
    t.prompt("go")
    t.message(
        "m1",
        text("Running."),
        use("b", "Bash", command=f"ls {cwd}/src", timeout=30000, run_in_background=False),
        stop="tool_use",
    )
    t.result("b", "x.py", {"stdout": "x.py", "stderr": "", "interrupted": False})
    t.message(
        "m2",
        use("g", "Grep", pattern="TODO", **{"-i": True, "-n": True}, output_mode="content"),
        stop="tool_use",
    )
    t.result("g", "x.py:1:todo", {"mode": "content"})
    t.message(
        "m3",
        text("Outside and odd tools."),
        use("w", "Write", file_path="/etc/motd", content="hi"),
        use("s", "Skill", skill="x"),
        stop="tool_use",
    )
    t.result("w", "File created successfully", {"type": "create"})
    t.result("s", "ok", None)
    t.message(
        "m4",
        use("a", "Agent", description="d", prompt="p"),
        use("m", "mcp__srv__tool", q=f"{cwd}/q"),
        stop="tool_use",
    )
    t.result("a", "launched", None)
    t.result("m", "ok", None)
    t.message("m5", use("r", "Read", file_path=f"{cwd}/x.py"), stop="tool_use")  # interrupted: no result
    t.add(
        {
            "type": "user",
            "message": {"role": "user", "content": [text("[Request interrupted by user for tool use]")]},
        }
    )
    res = import_sessions(ImportConfig(paths=(t.write(tmp_path / "s.jsonl"),), out=tmp_path / "out"))
    (path,) = res.written
    (turn,) = yaml.safe_load(path.read_text())["turns"]
    assert [s.get("tools") for s in turn["steps"]] == [
        [{"Bash": {"command": "ls {root}/src", "timeout_ms": 30000}}],
        [{"Grep": {"pattern": "TODO", "case_insensitive": True, "output_mode": "content"}}],
        [{"Agent": {"description": "d", "prompt": "p"}}, {"mcp__srv__tool": {"q": "{root}/q"}}],
        None,
    ]
    assert (
        turn["steps"][2]["text"] == "Outside and odd tools."
    )  # carried from the step whose calls were dropped
    assert turn["steps"][-1] == {"text": INTERRUPTED_TEXT}
    c = res.counts
    assert c["tool input fields dropped (Bash.run_in_background)"] == 1
    assert c["tool input fields dropped (Grep.-n)"] == 1
    assert c["writes outside the project (dropped)"] == 1
    assert c["calls of tools scenarios cannot script (Skill, dropped)"] == 1
    assert c["tool calls without a result (interrupted, dropped)"] == 1
    load_scenario(path)  # valid


def test_a_file_first_seen_after_edits_is_recovered_by_undoing_them(tmp_path: Path) -> None:
    cwd = str(tmp_path / "proj")
    t = Transcript(cwd=cwd)
    t.prompt("edit blind")
    for i, (old, new) in enumerate([("one", "two"), ("alpha", "beta")]):  # older Claude Code: no originalFile
        t.message(
            f"e{i}",
            use(f"e{i}", "Edit", file_path=f"{cwd}/f.txt", old_string=old, new_string=new),
            stop="tool_use",
        )
        t.result(f"e{i}", "updated", {"filePath": f"{cwd}/f.txt", "oldString": old, "newString": new})
    t.message(
        "e2", use("e2", "Edit", file_path=f"{cwd}/g.txt", old_string="x", new_string="y"), stop="tool_use"
    )
    t.result("e2", "updated", {"filePath": f"{cwd}/g.txt"})
    t.message(
        "r1",
        use("r1", "Read", file_path=f"{cwd}/f.txt"),
        use("r2", "Read", file_path=f"{cwd}/g.txt"),
        stop="tool_use",
    )
    t.result("r1", "1\ttwo beta", read_result(f"{cwd}/f.txt", "two beta\n"))
    t.result("r2", "1\ty y", read_result(f"{cwd}/g.txt", "y y\n"))  # two y: which one was x is unknown
    t.message("end", text("ok"))
    res = import_sessions(ImportConfig(paths=(t.write(tmp_path / "s.jsonl"),), out=tmp_path / "out"))
    doc = yaml.safe_load(res.written[0].read_text())
    assert doc["files"] == {"f.txt": "one alpha\n"}
    assert res.counts["files whose start could not be recovered (ambiguous edits)"] == 1
    edits = [s for s in doc["turns"][0]["steps"] if "Edit" in s.get("tools", [{}])[0]]
    # g.txt's start is unknown, so the replay's tree lacks it: the Edit that succeeded is expected to, and
    # the replay reports it unmet instead of failing it in silence (#36)
    assert [s.get("expect") for s in edits] == [{"exit_code": 0}, {"exit_code": 0}, {"exit_code": 0}]
    assert (
        res.counts[
            "Edits of files the transcript never shows (expected to succeed: the replay's tree lacks them, "
            "bench check says so)"
        ]
        == 1
    )


def test_exit_codes_claude_code_reinterprets_are_not_checked() -> None:
    """Claude Code records grep's exit 1 as success ("No matches found") without the code (2.1.332)."""
    from speculate.importers.checks import bash_exit
    from speculate.importers.sessions import ToolResult, ToolUse

    def bash(text: str, structured: object, error: bool = False) -> ToolUse:
        return ToolUse(
            "t", "Bash", {"command": "grep -rn x src"}, ToolResult(text, error, structured, 0, None)
        )

    base = {"stdout": "", "stderr": "", "interrupted": False}
    assert bash_exit(bash("", {**base, "returnCodeInterpretation": "No matches found"})) is None
    assert bash_exit(bash("src/a:1:x", base)) == 0
    assert bash_exit(bash("Exit code 2\nboom", "Error: Exit code 2\nboom", error=True)) == 2
    assert bash_exit(bash("Command timed out", "Error: timed out", error=True)) is None
