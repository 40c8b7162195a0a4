"""What people really have: a folder with a bad file or record in it, Claude Code 1.0.x transcripts (no parent
links, no ``promptSource``, no ``toolUseResult``), redaction of values only, and subagent files. Each shape
here failed on the importer before #36 (a folder import all or nothing; 1.0.x prompts "off the main line";
acceptance read as typed; ``"type": "text"`` redacted, losing the starting tree; subagents not imported)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from speculate.cli import main
from speculate.importers.claude_code import ImportConfig, import_sessions
from tests.importers.cc_records import Transcript, numbered, read_result, read_turn, text, use

DATA = Path(__file__).parent / "data"
CONFIG = 'MODE = "text"\nLIMIT = 3\n'


def good_session(cwd: str = "/work/proj") -> Transcript:
    t = Transcript(cwd=cwd)
    t.prompt("what does config.py set?")
    read_turn(t, "m1", "t1", "config.py", CONFIG)
    t.at(1).message("m2", text("It sets the mode and a limit."))
    t.turn_end()
    return t


def test_a_folder_import_goes_on_past_a_bad_file_and_a_bad_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "projects" / "-work-proj"
    good_session().write(project / "a.jsonl")
    # a session with one malformed record in the middle (and a bad UTF-8 line): the rest is read
    # (its own record uuids: a file with the same ones would be a fork's copy, not imported twice)
    copy = (
        good_session()
        .write(tmp_path / "b.jsonl")
        .read_text()
        .replace("00000000-0000-4000", "11111111-0000-4000")
    )
    lines = copy.splitlines(keepends=True)
    (project / "b.jsonl").write_bytes(
        "".join(lines[:3]).encode()
        + b'{"type": "user", "uuid": \n'
        + b"\xff\xfe\n"
        + "".join(lines[3:]).encode()
    )
    (project / "notes.jsonl").write_text("these are my notes\nnot a transcript\n")
    odd = Transcript(
        session="0dd00000-0000-4000-8000-000000000000"
    )  # records that parse, a shape that does not
    odd.prompt("hi")
    odd.message("m1", {"type": "tool_use", "id": "t1", "name": "Read", "input": ["not", "a", "mapping"]})
    odd.write(project / "c.jsonl")
    out = tmp_path / "out"
    assert main(["import", "claude-code", str(tmp_path / "projects"), "--out", str(out)]) == 3
    cap = capsys.readouterr()
    assert len(list(out.glob("*.yaml"))) == 2 and "2 scenario(s) written" in cap.out
    assert "skipped 2 file(s) and 2 record(s) that could not be read:" in cap.out
    assert f"file {project / 'c.jsonl'}: the importer failed on it (ValueError" in cap.out
    assert f"file {project / 'notes.jsonl'}:1: not JSON" in cap.out
    assert f"record {project / 'b.jsonl'}:4: not JSON" in cap.out
    assert f"record {project / 'b.jsonl'}:5: not UTF-8" in cap.out
    assert "skipped 2 file(s) and 2 record(s)" in cap.err
    # nothing skipped: exit 0
    assert main(["import", "claude-code", str(project / "a.jsonl"), "--out", str(out)]) == 0


def v1_session(cwd: str) -> list[dict[str, Any]]:
    """The shape of Claude Code 1.0.x: every record's parentUuid null, no promptSource, no toolUseResult, an
    assistant message in one record, a Read's text numbered with an arrow."""
    base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": cwd, "version": "1.0.51"}
    base["sessionId"] = "0ld5e551-0000-4000-8000-000000000000"
    recs: list[dict[str, Any]] = []
    clock = iter(range(10, 60))

    def add(kind: str, message: dict[str, Any]) -> None:
        n = len(recs) + 1
        ts = f"2025-07-01T10:00:{next(clock):02d}.000Z"
        recs.append({**base, "type": kind, "message": message, "uuid": f"u-{n}", "timestamp": ts})

    def assistant(mid: str, *content: dict[str, Any]) -> None:
        add(
            "assistant",
            {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4",
                "content": list(content),
            },
        )

    def result(tid: str, content: str) -> None:
        add(
            "user",
            {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": content}]},
        )

    shown = "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(CONFIG.split("\n"), start=1))
    add("user", {"role": "user", "content": "what does config.py set?"})
    assistant("m1", text("Let me look."), use("t1", "Read", file_path=f"{cwd}/config.py"))
    result("t1", shown)
    assistant("m2", text("It sets the mode and a limit."))
    add("user", {"role": "user", "content": "raise the limit to 5"})
    old, new = "LIMIT = 3", "LIMIT = 5"
    assistant("m3", use("t2", "Edit", file_path=f"{cwd}/config.py", old_string=old, new_string=new))
    result("t2", f"The file {cwd}/config.py has been updated.")
    assistant("m4", text("Done."))
    add("user", {"role": "user", "content": "and show me the readme"})
    assistant("m5", use("t3", "Read", file_path=f"{cwd}/README.md", offset=10, limit=5))
    result("t3", "    10\u2192## Usage")
    assistant("m6", text("That is the usage section."))
    recs.append({"type": "summary", "summary": "Config tweaks", "leafUuid": "u-12"})
    return recs


def test_a_1_0_transcript_without_parent_links_source_or_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = str(tmp_path / "proj")
    src = tmp_path / "in" / "old.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in v1_session(cwd)))
    res = import_sessions(ImportConfig(paths=(src,), out=tmp_path / "out"))
    (path,) = res.written
    doc = yaml.safe_load(path.read_text())
    # file order: every prompt is a turn, none "off the main line"
    assert [t["prompt"] for t in doc["turns"]] == [
        "what does config.py set?",
        "raise the limit to 5",
        "and show me the readme",
    ]
    assert (
        res.counts["files without parent links (read in file order, as Claude Code 1.0.x writes them)"] == 1
    )
    assert not any("off the main line" in k for k in res.counts)
    # promptSource absent: acceptance is unknown, said in the file and in the summary, not read as typed
    assert doc["acceptance"] == "unknown"
    assert "promptSource absent on 3 of 3 prompts" in doc["description"]
    assert "promptSource on 0 of 3 prompts: acceptance unknown" in res.lines[-1]
    assert (
        res.counts[
            "scenarios with acceptance unknown (promptSource absent: a null suggestion is not 'typed')"
        ]
        == 1
    )
    # no toolUseResult: the Read's numbered text gives the starting file, so the Edit's expectation holds
    assert doc["files"] == {"config.py": CONFIG}
    assert res.counts["Reads read back from their numbered text (no toolUseResult)"] == 1
    read, edit = doc["turns"][0]["steps"][0], doc["turns"][1]["steps"][0]
    assert read["expect"] == {"exit_code": 0, "contains": 'MODE = "text"'}
    assert edit["expect"] == {"exit_code": 0}
    # a window of a file the transcript never shows whole: not silently a failing Read, an expectation
    # that the replay reports unmet
    window = doc["turns"][2]["steps"][0]
    assert window["tools"] == [{"Read": {"file_path": "{root}/README.md", "offset": 10, "limit": 5}}]
    assert window["expect"] == {"exit_code": 0}
    key = "Reads of files the transcript never shows (expected to succeed: the replay's tree lacks them, bench check says so)"
    assert res.counts[key] == 1


def quoted_enum_session(cwd: str) -> Transcript:
    """A file whose content quotes the word "text" (as the Read result's own "type" is "text")."""
    t = Transcript(cwd=cwd)
    t.prompt("what does config.py set the mode to?")
    read_turn(t, "m1", "t1", "config.py", CONFIG)
    t.at(1).message("m2", text('The mode is "text" and the limit 3.'))
    t.turn_end()
    t.at(5).prompt("change the text mode to html")
    t.message(
        "m3",
        use("t2", "Edit", file_path=f"{cwd}/config.py", old_string='"text"', new_string='"html"'),
        stop="tool_use",
    )
    t.at(0.1).result(
        "t2",
        f"The file {cwd}/config.py has been updated successfully.",
        {
            "filePath": f"{cwd}/config.py",
            "oldString": '"text"',
            "newString": '"html"',
            "originalFile": CONFIG,
        },
    )
    t.at(1).message("m4", text("Done."))
    return t


def test_redact_replaces_values_not_structure_and_keeps_lengths(tmp_path: Path) -> None:
    cwd = str(tmp_path / "proj")
    src = quoted_enum_session(cwd).write(tmp_path / "in" / "s.jsonl")
    plain = import_sessions(ImportConfig(paths=(src,), out=tmp_path / "plain"))
    red = import_sessions(ImportConfig(paths=(src,), out=tmp_path / "red", redact=True))
    (p,), (r,) = plain.written, red.written
    a, b = yaml.safe_load(p.read_text()), yaml.safe_load(r.read_text())
    # the starting tree and every expectation survive ("type": "text" is structure, not a value)
    assert len(b["files"]) == len(a["files"]) == 1

    def expects(doc: dict[str, Any]) -> list[Any]:
        return [s.get("expect") for t in doc["turns"] for s in t["steps"]]

    assert (
        [e is not None for e in expects(b)]
        == [e is not None for e in expects(a)]
        == [True, False, True, False]
    )
    assert "text" not in json.dumps(b["files"]) and '"text"' not in r.read_text()
    # redacted text keeps its length: the modelled typing time of every prompt is unchanged
    assert [len(t["prompt"]) for t in b["turns"]] == [len(t["prompt"]) for t in a["turns"]]
    assert b["turns"][1]["prompt"] != a["turns"][1]["prompt"]  # the quoted word, where it recurs, is hidden
    (content,) = b["files"].values()
    assert len(content) == len(CONFIG)
    # what redaction removed is counted
    assert red.counts["redacted (string literals)"] > 0 and red.counts["redacted (characters)"] > 0
    assert red.counts["redacted (path components)"] > 0


def test_subagent_files_are_imported_as_sidechain_scenarios(tmp_path: Path) -> None:
    res = import_sessions(ImportConfig(paths=(DATA / "agent",), out=tmp_path / "out"))
    names = sorted(p.name for p in res.written)
    assert len(names) == 2 and sum("-agent-af47c1eb" in n for n in names) == 1
    sub = yaml.safe_load(next(p for p in res.written if "-agent-" in p.name).read_text())
    assert sub["turns"][0]["prompt"] == "Find the file that defines paginate and report its path."
    assert "Grep" in sub["turns"][0]["steps"][0]["tools"][0]
    assert sub["description"].startswith("Claude Code 2.1.332 subagent af47c1eb38a87d3ab of session c9f178cd")
    assert res.counts["subagent transcripts (sidechains, imported as their own scenarios)"] == 1
    # the session file given alone brings its subagents
    (session,) = (DATA / "agent").glob("*.jsonl")
    again = import_sessions(ImportConfig(paths=(session,), out=tmp_path / "again"))
    assert sorted(p.name for p in again.written) == names


def test_acceptance_is_a_named_field_of_the_scenario(tmp_path: Path) -> None:
    from speculate.sim.scenario import ScenarioError
    from speculate.sim.scenario_yaml import parse_scenario

    doc = "name: x\nacceptance: {}\nturns:\n  - prompt: hi\n    steps:\n      - text: hello\n"
    assert parse_scenario(doc.format("unknown")).acceptance == "unknown"
    assert (
        parse_scenario("name: x\nturns:\n  - prompt: hi\n    steps:\n      - text: hello\n").acceptance
        == "scripted"
    )
    with pytest.raises(
        ScenarioError, match="acceptance must be one of scripted, recorded, unknown, got 'maybe'"
    ):
        parse_scenario(doc.format("maybe"))


def test_every_record_type_claude_code_2_1_writes(tmp_path: Path) -> None:
    """queue-operation, file-history-snapshot, progress, system (api_error, local_command, turn_duration),
    summary, custom-title, IDE tags and an image in a prompt, and a resumed session (Claude Code 2.1.332
    appends a resumed -p session to its file, the new prompt chained to the last answer: data/resumed.jsonl)."""
    cwd = str(tmp_path / "proj")
    t = Transcript(cwd=cwd)
    t.add(
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}, "isSnapshotUpdate": False},
        chain=False,
    )
    ide = (
        f"<ide_opened_file>The user opened the file {cwd}/config.py in the IDE. This may or may not be "
        "related to the current task.</ide_opened_file>"
    )
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}
    t.prompt([text(ide), image, text("what does config.py set?")])  # type: ignore[arg-type]
    t.add({"type": "progress", "data": {"type": "hook_progress"}, "toolUseID": "t0", "parentToolUseID": "t0"})
    # two parallel Reads; the second's result hangs off a progress record that hangs off its call, off the
    # line from the last record (which passes through the first's result)
    t.message(
        "m1", use("t1", "Read", file_path=f"{cwd}/config.py"), use("t9", "Read", file_path=f"{cwd}/b.py")
    )
    call = t.parent
    t.add({"type": "progress", "data": {"type": "hook_progress"}, "toolUseID": "t9"}, parent=call)
    t.result("t9", numbered("b = 1\n"), read_result(f"{cwd}/b.py", "b = 1\n"))
    t.result("t1", numbered(CONFIG), read_result(f"{cwd}/config.py", CONFIG), parent=call)
    t.add({"type": "system", "subtype": "api_error", "level": "error", "retryAttempt": 1, "isMeta": False})
    t.at(1).message("m2", text("It sets the mode and a limit."))
    t.turn_end()
    t.add({"type": "summary", "summary": "Config questions", "leafUuid": t.parent}, chain=False)
    t.add({"type": "custom-title", "customTitle": "config", "sessionId": t.session}, chain=False)
    t.bookkeeping()
    t.at(30).prompt("and the limit?", source="sdk")  # resumed later: chained to the last answer
    t.at(1).message("m3", text("3."))
    res = import_sessions(ImportConfig(paths=(t.write(tmp_path / "s.jsonl"),), out=tmp_path / "out"))
    (path,) = res.written
    doc = yaml.safe_load(path.read_text())
    assert [x["prompt"] for x in doc["turns"]] == ["what does config.py set?", "and the limit?"]
    assert doc["files"] == {"config.py": CONFIG, "b.py": "b = 1\n"} and doc["turns"][1]["pause_s"] == 30.0
    assert res.counts["IDE context or reminders taken out of prompts"] == 1
    assert res.counts["images in prompts (dropped)"] == 1
    assert not [k for k in res.counts if "unknown" in k or "off the main line" in k or "chain cut" in k]


def test_a_real_resumed_print_mode_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """data/resumed.jsonl: Claude Code 2.1.332 against the simulator, `claude -p` then `--resume` then
    `--continue` (one file; its Grep and Glob ran as Bash in this build). The replay checks the Read and the
    Edit; the commands have no expectation without --repo, and bench check says so."""
    from bench.check import check_main

    res = import_sessions(ImportConfig(paths=(DATA / "resumed.jsonl",), out=tmp_path / "out"))
    (path,) = res.written
    doc = yaml.safe_load(path.read_text())
    assert [x["prompt"] for x in doc["turns"]] == [
        "what does config.py set?",
        "raise the limit to 5",
        "list the python files",
    ]
    assert doc["acceptance"] == "recorded" and doc["files"] == {"config.py": CONFIG}
    assert check_main([str(path), "--time-scale", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "turn 1 'what does config.py set?': ok, 1 of 2 tool result(s) checked" in out
    assert "turn 3 'list the python files': replay unverified" in out
    assert check_main([str(path), "--time-scale", "0.01", "--strict"]) == 1


def test_each_checkable_result_of_a_step_gets_its_own_expectation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parallel calls: a Read that failed, one that succeeded and a command (unchecked without --repo). Before
    #36 the step had no expectation at all (not every call checkable, two exit codes)."""
    from bench.check import check_main

    cwd = str(tmp_path / "proj")
    t = Transcript(cwd=cwd)
    t.prompt("what do the configs set?")
    t.message(
        "m1",
        use("t1", "Read", file_path=f"{cwd}/missing.py"),
        use("t2", "Read", file_path=f"{cwd}/config.py"),
        use("t3", "Bash", command="ls"),
        stop="tool_use",
    )
    t.result(
        "t1",
        "<tool_use_error>File does not exist.</tool_use_error>",
        "Error: File does not exist.",
        error=True,
    )
    t.result("t2", numbered(CONFIG), read_result(f"{cwd}/config.py", CONFIG))
    t.result("t3", "config.py", {"stdout": "config.py", "stderr": "", "interrupted": False})
    t.at(1).message("m2", text("Only config.py exists."))
    res = import_sessions(ImportConfig(paths=(t.write(tmp_path / "s.jsonl"),), out=tmp_path / "out"))
    (path,) = res.written
    step = yaml.safe_load(path.read_text())["turns"][0]["steps"][0]
    assert step["expect"] == [{"exit_code": 1}, {"exit_code": 0, "contains": 'MODE = "text"'}, None]
    assert "2 expectations" in res.lines[-1]
    assert check_main([str(path), "--time-scale", "0.01"]) == 0
    assert "ok, 2 of 3 tool result(s) checked" in capsys.readouterr().out


def test_a_forked_session_is_not_imported_twice(tmp_path: Path) -> None:
    """data/forked/: Claude Code 2.1.332's `--resume SESSION --fork-session` writes a new file (a new session
    id) that copies the conversation, record uuids and all, then goes on: one scenario, the whole of it."""
    res = import_sessions(ImportConfig(paths=(DATA / "forked",), out=tmp_path / "out"))
    (path,) = res.written
    doc = yaml.safe_load(path.read_text())
    assert [t["prompt"] for t in doc["turns"]] == [
        "what does config.py set?",
        "raise the limit to 5",
        "list the python files",
        "list the python files",
    ]
    assert res.counts["prompts already imported from another file (a forked session's copy, left out)"] == 3
    assert res.counts["sessions with no turn left to import (all copied from another file)"] == 1
