"""Reading transcripts: bad input named by file and line, and what the importer finds in each record type
(hand-made transcripts in Claude Code's shapes, tests/importers/cc_records.py, and real excerpts, data/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.importers.files import Skipped, discover, load
from speculate.importers.records import TranscriptError, read_records
from speculate.importers.sessions import Counts, RecordedSession, sessions
from tests.importers.cc_records import CWD, Transcript, text, use

DATA = Path(__file__).parent / "data"


def parse(path: Path) -> tuple[list[RecordedSession], Counts]:
    counts = Counts()
    records = load(path, counts, Skipped())
    assert records is not None
    return sessions(path, records, counts), counts


@pytest.mark.parametrize(("content", "line", "reason"), [
    ("hello world\n", 1, "not JSON"),
    ('{"type": "user", "message": {"role": "user", "content": "hi"}}\n[1, 2]\n', 2, "must be a JSON object"),
    ('{"message": {}}\n', 1, "string 'type'"),
    ('{"type": "user", "uuid": "u"}\n', 1, "user record: message: Field required"),
    ('{"type": "assistant", "message": {"role": "assistant", "content": "text"}}\n', 1,
     "assistant record: message.content"),
    ('{"type": "user", "message": {"role": "user", "content": "x"}, "timestamp": "yesterday"}\n', 1,
     "timestamp"),
])  # fmt: skip
def test_bad_input_names_the_file_and_line(tmp_path: Path, content: str, line: int, reason: str) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text(content)
    with pytest.raises(TranscriptError) as e:
        list(read_records(f))
    assert str(e.value).startswith(f"{f}:{line}: ")
    assert reason in str(e.value)
    assert "\n" not in str(e.value)


def test_not_utf8_and_missing_paths_are_named(tmp_path: Path) -> None:
    f = tmp_path / "bin.jsonl"
    f.write_bytes(b'{"type": "mode", "mode": "normal"}\n\xff\xfe\n')
    with pytest.raises(TranscriptError, match=rf"^{f}:2: not UTF-8"):
        list(read_records(f))
    with pytest.raises(TranscriptError, match="no such file or directory"):
        discover([tmp_path / "nope"])


def test_a_torn_last_line_is_counted_and_unknown_types_are_skipped_and_counted(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("look at a")
    t.add({"type": "hologram", "sessionId": "s"}, chain=False)
    t.add({"type": "hologram", "sessionId": "s"}, chain=False)
    t.bookkeeping()
    t.message("m1", text("a holds alpha"))
    f = t.write(tmp_path / "s.jsonl", tail='{"type": "assistant", "mess')
    (s,), counts = parse(f)
    assert [x.prompt for x in s.turns] == ["look at a"]
    assert counts["torn last lines (skipped)"] == 1
    assert counts["unknown record types (hologram, skipped)"] == 2
    assert not any("cost-state" in k or "last-prompt" in k for k in counts)  # known bookkeeping: not unknown
    # A torn line elsewhere is a bad record: skipped and listed, the rest of the file read
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "assistant", "mess\n' + (tmp_path / "s.jsonl").read_text())
    skipped, counts = Skipped(), Counts()
    records = load(bad, counts, skipped)
    assert records is not None and len(records) == len(t.records)
    (line,) = skipped.records
    assert line.startswith(f"{bad}:1: not JSON") and counts["records skipped (cannot be read)"] == 1


def test_steps_group_blocks_by_message_and_results_by_id(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("read both")
    # Two parallel calls in one message; Claude Code writes each result right after its block
    t.message("m1", text("Reading."), use("t1", "Read", file_path=f"{CWD}/a.txt"), stop="tool_use")
    t.result("t1", "1\talpha", None)
    t.message("m1", use("t2", "Read", file_path=f"{CWD}/b.txt"), stop="tool_use")
    t.result("t2", "1\tbeta", None)
    t.message("m2", {"type": "thinking", "thinking": "both read", "signature": "sig"}, text("Done."))
    (s,), _ = parse(t.write(tmp_path / "s.jsonl"))
    (turn,) = s.turns
    assert [([u.name for u in st.tools], st.text) for st in turn.steps] == [
        (["Read", "Read"], ["Reading."]),
        ([], ["Done."]),
    ]
    assert [u.result.text for u in turn.steps[0].tools if u.result] == ["1\talpha", "1\tbeta"]
    assert turn.steps[1].thinking == ["both read"]
    assert s.cwd == CWD and s.model == "claude-opus-5-5"


def test_results_of_parallel_calls_hang_off_the_chain_and_are_kept(tmp_path: Path) -> None:
    """Interactive Claude Code chains block 1 to block 0, then each result to its own call's record: the
    first result is not on the parent chain from the last record (observed from the CLI, 2.1.332)."""
    t = Transcript()
    t.prompt("edit both")
    t.message("m1", use("t1", "Edit", file_path=f"{CWD}/a", old_string="a", new_string="b"), stop="tool_use")
    first = t.parent
    t.message("m1", use("t2", "Edit", file_path=f"{CWD}/c", old_string="c", new_string="d"), stop="tool_use")
    second = t.parent
    t.result("t1", "updated a", None, parent=first)
    t.result("t2", "updated c", None, parent=second)
    t.message("m2", text("Both edited."))
    (s,), counts = parse(t.write(tmp_path / "s.jsonl"))
    (turn,) = s.turns
    assert [[(u.name, u.result.text if u.result else None) for u in st.tools] for st in turn.steps] == [
        [("Edit", "updated a"), ("Edit", "updated c")],
        [],
    ]
    assert not counts["messages off the main line (rewound or re-sent)"]


def test_a_parallel_call_off_the_chain_is_kept_with_its_result(tmp_path: Path) -> None:
    """Seen from the CLI (2.1.332, -p): block 1 (Glob) chains to block 0 (Grep), each result to its own call,
    and the answer chains to block 0's result, so the line from the last record passes Grep only: the
    Glob call and its result hang off it, one record deep each."""
    t = Transcript()
    t.prompt("find it")
    t.message("m1", use("t1", "Grep", pattern="x"), stop="tool_use")
    grep = t.parent
    t.message("m1", use("t2", "Glob", pattern="*.py"), stop="tool_use")
    t.result("t2", "a.py", None)  # chained to the Glob call
    line = t.result("t1", "a.py:1:x", None, parent=grep)
    # A rewound response off the line (another message id, hanging off a kept record) stays out
    t.add(
        {
            "type": "assistant",
            "message": {
                "id": "m9",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [text("an abandoned answer")],
                "stop_reason": "end_turn",
            },
        },
        parent=grep,
    )
    t.parent = line
    t.message("m2", text("Found."))
    (s,), counts = parse(t.write(tmp_path / "s.jsonl"))
    (turn,) = s.turns
    assert [[(u.name, u.result.text if u.result else None) for u in st.tools] for st in turn.steps] == [
        [("Grep", "a.py:1:x"), ("Glob", "a.py")],
        [],
    ]
    assert [st.text for st in turn.steps] == [[], ["Found."]]
    assert counts["messages off the main line (rewound or re-sent)"] == 1


def test_prompt_sources_pauses_api_errors_and_system_turns(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("one")
    t.at(2).message("m1", text("first"))
    t.at(0.2).turn_end()
    t.at(7).prompt("two", source="suggestion_accepted")
    t.message("m2", text("API Error: 529 overloaded"), model="<synthetic>", isApiErrorMessage=True)
    t.at(1).message("m3", text("second"))
    t.at(3).add(
        {
            "type": "user",
            "message": {"role": "user", "content": "<task-notification>done"},
            "origin": {"kind": "task-notification"},
            "promptSource": "system",
        }
    )
    t.message("m4", text("the task finished"))
    t.at(4).prompt("three", source="queued")
    t.message("m5", text("third"))
    (s,), counts = parse(t.write(tmp_path / "s.jsonl"))
    assert [(x.prompt, x.source) for x in s.turns] == [
        ("one", "typed"),
        ("two", "suggestion_accepted"),
        ("three", "queued"),
    ]
    assert [[st.text for st in x.steps] for x in s.turns] == [[["first"]], [["second"]], [["third"]]]
    first, second = s.turns[:2]
    assert first.end is not None and second.at is not None
    assert (second.at - first.end).total_seconds() == pytest.approx(7.0)  # from the turn's end record
    assert counts["API error messages"] == 1
    assert counts["system-initiated turns (e.g. a background task finished)"] == 1
    assert counts["assistant messages of system-initiated turns"] == 1


def test_a_rewound_branch_and_an_unanswered_prompt_are_left_out(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("one")
    t.message("m1", text("first"))
    fork = t.parent
    t.prompt("two (abandoned)")
    t.message("m2", text("abandoned answer"))
    t.add(
        {
            "promptId": "p",
            "type": "user",
            "message": {"role": "user", "content": "two, rewritten"},
            "promptSource": "typed",
            "origin": {"kind": "human"},
        },
        parent=fork,
    )
    t.message("m3", text("second"))
    t.prompt("three, never answered")
    (s,), counts = parse(t.write(tmp_path / "s.jsonl"))
    assert [x.prompt for x in s.turns] == ["one", "two, rewritten"]
    assert counts["messages off the main line (rewound or re-sent)"] == 2
    assert counts["prompts without an answer (dropped)"] == 1


def test_inline_sidechains_and_images_in_prompts_are_counted(tmp_path: Path) -> None:
    t = Transcript()
    t.add(
        {
            "promptId": "p",
            "type": "user",
            "promptSource": "typed",
            "origin": {"kind": "human"},
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
                    },
                    text("what is in this picture?"),
                ],
            },
        }
    )
    main = t.parent
    t.add(
        {"type": "user", "isSidechain": True, "message": {"role": "user", "content": "sub task"}}, parent=None
    )
    t.add(
        {
            "type": "assistant",
            "isSidechain": True,
            "message": {"id": "s1", "role": "assistant", "content": [text("sub answer")]},
        }
    )
    t.parent = main
    t.message("m1", text("A cat."))
    (s,), counts = parse(t.write(tmp_path / "s.jsonl"))
    assert [(x.prompt, [st.text for st in x.steps]) for x in s.turns] == [
        ("what is in this picture?", [["A cat."]])
    ]
    assert counts["images in prompts (dropped)"] == 1
    assert counts["subagent (sidechain) records inside a session file, not replayed"] == 2


def test_real_interrupt_and_compaction() -> None:
    (s,), counts = parse(DATA / "interrupt_compact.jsonl")
    (turn,) = s.turns  # the first, unanswered copy of the prompt is off the main line
    assert turn.prompt == "why does page 2 of the product list repeat the last item of page 1?"
    assert turn.interrupted and turn.source == "typed"
    assert [[u.name for u in st.tools] for st in turn.steps] == [["Grep"], ["Read"], []]
    assert counts["interrupted turns"] == 1
    assert counts["compactions (summary not replayed)"] == 1
    assert counts["compaction boundaries"] == 1
    assert counts["slash commands (/compact)"] == 1
    assert counts["messages off the main line (rewound or re-sent)"] == 1


def test_real_clear_image_and_error() -> None:
    (s,), counts = parse(DATA / "clear.jsonl")
    assert counts["/clear (new session)"] == 1
    assert next(x.prompt for x in s.turns).startswith("why does page 2")  # the caveat is no prompt
    (s,), counts = parse(DATA / "image_error.jsonl")
    (turn,) = s.turns
    assert turn.source == "sdk"
    missing, image = (st.tools[0] for st in turn.steps[:2])
    assert missing.result is not None and missing.result.is_error
    assert image.result is not None and image.result.images == 1
    assert counts["tool errors"] == 1 and counts["images in tool results"] == 1


def test_real_subagent_project_directory() -> None:
    """A session's subagent transcript (<session>/subagents/agent-*.jsonl, every record isSidechain) is
    found beside it and read as a session of its own: the prompt the main agent gave it, its calls."""
    files = discover([DATA / "agent"])
    assert [f.parent.name for f in files] == ["agent", "subagents"]
    (s,), counts = parse(files[0])
    (turn,) = s.turns
    assert [[u.name for u in st.tools] for st in turn.steps] == [["Agent"], []]
    assert counts["system-initiated turns (e.g. a background task finished)"] == 1
    (sub,), counts = parse(files[1])
    assert sub.agent_id == "af47c1eb38a87d3ab" and sub.session_id == s.session_id
    (turn,) = sub.turns
    assert turn.prompt == "Find the file that defines paginate and report its path."
    assert turn.source == "agent"  # the main agent wrote it: no suggestion was possible
    assert [[u.name for u in st.tools] for st in turn.steps] == [["Grep"], []]
    assert turn.steps[0].tools[0].result is not None
