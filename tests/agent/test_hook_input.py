"""What a hook is given, in Claude Code 2.1.332's shapes (observed from the real CLI, docs/claude-code.md
"Hooks"): the stdin fields of every event, tool_response per tool, the environment, a transcript it can read;
matching hooks run in parallel, each command once; the session's events (SessionStart, PreCompact,
SessionEnd). Real hooks, sessions on the simulator."""

from __future__ import annotations

import itertools
import json
import re
import uuid
from pathlib import Path

import pytest
import trio

from speculate import __version__
from speculate.compaction import CompactionFailed

from .hook_kit import command, hook_events, logged, on, project, reminders, session

EVERY = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "PreCompact",
    "SessionEnd",
]


def test_every_event_carries_claude_codes_fields_and_the_transcript_is_readable(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    root, _ = project(tmp_path, {e: [{"hooks": [command(log, "true")]}] for e in EVERY})

    async def main() -> None:
        async with session(root, []) as (s, _):
            await s.submit("read a")
            await s.submit("run false")
            await s.compact(instructions="keep the names")

    trio.run(main)
    sent = logged(log)
    assert [e["hook_event_name"] for e in sent] == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUseFailure",
        "Stop",
        "PreCompact",
        "SessionStart",
        "SessionEnd",
    ]
    first = sent[0]
    assert uuid.UUID(first["session_id"]) and all(e["session_id"] == first["session_id"] for e in sent)
    assert all(e["cwd"] == str(root.resolve()) for e in sent)
    assert first == {
        k: first[k] for k in ("session_id", "transcript_path", "cwd", "hook_event_name", "source")
    }
    assert first["source"] == "startup" and "prompt_id" not in first
    by = {e["hook_event_name"]: e for e in sent[1:5]}
    prompt_id = by["UserPromptSubmit"]["prompt_id"]
    assert all(e["prompt_id"] == prompt_id and e["permission_mode"] == "acceptEdits" for e in by.values())
    assert sent[5]["prompt_id"] != prompt_id  # one per prompt
    post = by["PostToolUse"]
    assert isinstance(post["duration_ms"], int) and post["tool_use_id"] == by["PreToolUse"]["tool_use_id"]
    assert by["Stop"]["last_assistant_message"] == "Done." and by["Stop"]["stop_hook_active"] is False
    failure = sent[7]
    assert failure["error"] == "nope\nExit code 1" and failure["is_interrupt"] is False
    assert sent[9]["trigger"] == "manual" and sent[9]["custom_instructions"] == "keep the names"
    assert sent[10]["source"] == "compact" and sent[11]["reason"] == "other"
    # The transcript: Claude Code's line shape, every message up to the hook's event.
    lines = [json.loads(x) for x in Path(first["transcript_path"]).read_text().splitlines()]
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(root.resolve()))  # as Claude Code names its project directories
    assert Path(first["transcript_path"]).parent == tmp_path / "transcripts" / slug
    convo = [x for x in lines if x["type"] in ("user", "assistant")]
    assert convo[0]["message"]["content"][0]["text"] == "read a" and convo[0]["parentUuid"] is None
    assert all(b["parentUuid"] == a["uuid"] for a, b in itertools.pairwise(lines))
    assert (
        convo[1]["message"]["content"][0]["name"] == "Read" and convo[0]["sessionId"] == first["session_id"]
    )
    assert [x["subtype"] for x in lines if x["type"] == "system"] == ["compact_boundary"]


def test_tool_response_is_the_per_tool_object_claude_code_sends(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    root, _ = project(tmp_path, on("PostToolUse", command(log, "true")))
    (root / "b.txt").write_text("old\n")

    async def main() -> None:
        async with session(root, []) as (s, _):
            await s.submit("look around")

    trio.run(main)
    got = {e["tool_name"]: e["tool_response"] for e in logged(log)}
    a, b = f"{root.resolve()}/a.txt", f"{root.resolve()}/b.txt"
    assert got["Read"] == {
        "type": "text",
        "file": {"filePath": a, "content": "alpha\n", "numLines": 2, "startLine": 1, "totalLines": 2},
    }
    assert got["Edit"] == {
        "filePath": a,
        "oldString": "alpha",
        "newString": "gamma",
        "originalFile": "alpha\n",
        "structuredPatch": [
            {"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1, "lines": ["-alpha", "+gamma"]}
        ],
        "userModified": False,
        "replaceAll": False,
    }
    assert got["Write"] == {
        "type": "update",
        "filePath": b,
        "content": "beta\n",
        "originalFile": "old\n",
        "structuredPatch": [
            {"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1, "lines": ["-old", "+beta"]}
        ],
        "userModified": False,
    }
    assert got["Bash"] == {
        "stdout": "out\nerr",
        "stderr": "",
        "interrupted": False,
        "isImage": False,
        "noOutputExpected": False,
    }
    glob = got["Glob"]
    assert sorted(glob.pop("filenames")) == [a, b] and isinstance(glob.pop("durationMs"), int)
    assert glob == {"numFiles": 2, "truncated": False, "totalMatches": 2, "countIsComplete": True}
    assert got["Grep"] == {"mode": "files_with_matches", "filenames": [a], "numFiles": 1, "totalFiles": 1}


def test_the_environment_names_the_project_and_the_session(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    root, _ = project(
        tmp_path,
        on(
            "UserPromptSubmit",
            {
                "type": "command",
                "command": (
                    f'echo "$CLAUDE_PROJECT_DIR|$CLAUDECODE|$CLAUDE_CODE_SESSION_ID|$AI_AGENT" > {out}'
                ),
            },
        ),
    )

    async def main() -> None:
        async with session(root, []) as (s, _):
            await s.submit("read a")
            assert out.read_text().strip().split("|") == [
                str(root.resolve()),
                "1",
                s.session_id,
                f"speculate_{__version__}",
            ]

    trio.run(main)


def test_matching_hooks_run_in_parallel_each_command_once(tmp_path: Path) -> None:
    # Each waits (up to 5 s) for the other's mark: one after the other, the first would give up (exit 1).
    wait = 'touch "{me}"; for i in $(seq 50); do [ -e "{other}" ] && exit 0; sleep 0.1; done; exit 1'
    a, b = tmp_path / "a.mark", tmp_path / "b.mark"
    log = tmp_path / "h.log"
    same = command(log, "true")
    root, _ = project(
        tmp_path,
        {
            "PreToolUse": [
                {
                    "matcher": "Read",
                    "hooks": [
                        {"type": "command", "command": wait.format(me=a, other=b)},
                        {"type": "command", "command": wait.format(me=b, other=a)},
                        same,
                    ],
                },
                {"matcher": "Read|Glob", "hooks": [same]},
            ]
        },
    )
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, _):
            await s.submit("read a")

    trio.run(main)
    assert [r.exit_code for r in hook_events(events)] == [0, 0, 0]  # settings order, the duplicate once
    assert len(logged(log)) == 1


def test_session_start_context_reaches_the_first_prompt_and_clear_starts_a_new_session(
    tmp_path: Path,
) -> None:
    log = tmp_path / "h.log"
    root, _ = project(
        tmp_path,
        {
            "SessionStart": [
                {"matcher": "startup", "hooks": [command(log, "echo 'branch: main'")]},
                {"matcher": "clear", "hooks": [command(log, "echo cleared")]},
            ],
            "SessionEnd": [{"hooks": [command(log, "true")]}],
        },
    )

    async def main() -> None:
        async with session(root, []) as (s, sim):
            first = s.session_id
            await s.submit("read a")
            assert reminders(s.messages[0]) == ["SessionStart:startup hook success: branch: main"]
            assert sim.statistics().engine.fallbacks == 0
            await s.clear()
            assert s.session_id != first
            await s.submit("read a")
            assert reminders(s.messages[0]) == ["SessionStart:clear hook success: cleared"]

    trio.run(main)
    sent = logged(log)
    assert [(e["hook_event_name"], e.get("source") or e.get("reason")) for e in sent] == [
        ("SessionStart", "startup"),
        ("SessionEnd", "clear"),
        ("SessionStart", "clear"),
        ("SessionEnd", "other"),
    ]
    assert sent[1]["session_id"] != sent[2]["session_id"] == sent[3]["session_id"]
    assert sent[1]["transcript_path"] != sent[2]["transcript_path"]


def test_a_pre_compact_hook_that_exits_2_keeps_the_conversation(tmp_path: Path) -> None:
    root, _ = project(
        tmp_path,
        on("PreCompact", {"type": "command", "command": "echo 'not now' >&2; exit 2"}, matcher="manual"),
    )

    async def main() -> None:
        async with session(root, []) as (s, _):
            await s.submit("read a")
            before = list(s.messages)
            with pytest.raises(CompactionFailed, match=r"blocked by a PreCompact hook: .*not now"):
                await s.compact()
            assert s.messages == before and s.compactor.failures == 0  # not a failure of the summary

    trio.run(main)


def test_hooks_lists_what_is_loaded(tmp_path: Path) -> None:
    root, _ = project(
        tmp_path,
        {
            "PreToolUse": [
                {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "lint.sh", "timeout": 5}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "not-run.sh"}]}],
        },
    )

    async def main() -> None:
        async with session(root, []) as (s, _):
            assert s.hooks.listing().splitlines() == [
                "PreToolUse:",
                "  lint.sh  (matches Write|Edit, timeout 5 s, .claude/settings.json)",
                "Stop:",
                "  notify.sh  (no matcher, timeout 60 s, .claude/settings.json)",
                f"transcript for hooks: {s.hook_transcript.path}",
            ]

    trio.run(main)
