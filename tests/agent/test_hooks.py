"""Hooks in the main loop: real shell commands from a real .claude/settings.json, sessions on the simulator.

Each hook appends the JSON it read on stdin to a log outside the project, so a test sees what it was sent.
"""

from __future__ import annotations

from pathlib import Path

import trio

from .hook_kit import command, hook_events, logged, project, session


def test_pre_tool_use_exit_2_refuses_the_call_and_tells_the_model_why(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    root, log = project(
        tmp_path,
        {
            "PreToolUse": [
                {
                    "matcher": "Write|Edit",
                    "hooks": [command(log, 'echo "writes are frozen today" >&2; exit 2')],
                },
                {
                    "matcher": "Read",
                    "hooks": [command(log, 'echo "read is fine"; test "$CLAUDE_PROJECT_DIR" = "$PWD"')],
                },
            ]
        },
    )
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, _):
            await s.submit("write the secret")
            assert not (root / "secret.txt").exists()
            (result,) = s.messages[2]["content"]
            assert result["is_error"]  # the model sees Claude Code's words: the tool, the command, its stderr
            cmd = f'printf \'%s\\n\' "$(cat)" >> {log}; echo "writes are frozen today" >&2; exit 2'
            assert result["content"] == f"PreToolUse:Write hook error: [{cmd}]: writes are frozen today"
            await s.submit("read a")  # the Read hook allows (exit 0): the call runs
            assert "alpha" in s.messages[-2]["content"][0]["content"]

    trio.run(main)
    sent = logged(log)
    assert [e["tool_name"] for e in sent] == ["Write", "Read"]
    write = sent[0]
    assert write["hook_event_name"] == "PreToolUse" and write["cwd"] == str(root.resolve())
    assert write["tool_input"] == {"file_path": f"{root.resolve()}/secret.txt", "content": "s3cret\n"}
    assert write["tool_use_id"].startswith("toolu_") and write["permission_mode"] == "acceptEdits"
    assert write["session_id"] and write["session_id"] == sent[1]["session_id"]
    ran = hook_events(events)
    assert [(r.event, r.exit_code, r.blocked) for r in ran] == [
        ("PreToolUse", 2, True),
        ("PreToolUse", 0, False),
    ]
    assert ran[1].stdout.strip() == "read is fine"  # shown to the user by the REPL


def test_post_tool_use_feedback_warnings_and_timeouts(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    root, log = project(
        tmp_path,
        {
            "PostToolUse": [
                {
                    "matcher": "Read",
                    "hooks": [
                        command(log, 'echo "a.txt is generated: edit a.in instead" >&2; exit 2'),
                        command(log, "echo broken >&2; exit 1"),
                        {"type": "command", "command": "sleep 5", "timeout": 0.3},
                    ],
                },
                {"matcher": "Write", "hooks": [command(log, "exit 0")]},
            ]
        },
    )
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, _):
            await s.submit("read a")
            result, note = s.messages[2]["content"]
            assert (
                not result.get("is_error") and result["content"] == "     1\talpha"
            )  # the call ran, as it was
            # The feedback follows the results, as Claude Code sends it (there: a system message).
            cmd = f'printf \'%s\\n\' "$(cat)" >> {log}; echo "a.txt is generated: edit a.in instead" >&2; exit 2'
            assert note["text"] == (
                "<system-reminder>\nPostToolUse:Read hook blocking error from command: "
                f'"{cmd}": [{cmd}]: a.txt is generated: edit a.in instead\n</system-reminder>'
            )

    trio.run(main)
    ran = hook_events(events)
    assert [(r.blocked, r.failed, r.timed_out) for r in ran] == [
        (True, False, False),
        (False, True, False),
        (False, True, True),
    ]  # exit 2, exit 1, killed at 0.3 s
    assert ran[1].stderr.strip() == "broken"
    (sent,) = logged(log)[:1]
    assert sent["hook_event_name"] == "PostToolUse"
    assert sent["tool_response"]["file"]["content"] == "alpha\n"


def test_user_prompt_submit_adds_context_or_blocks_the_prompt(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    root, log = project(
        tmp_path,
        {
            "UserPromptSubmit": [
                {
                    "hooks": [
                        command(
                            log,
                            'if grep -q secret "'
                            + str(log)
                            + '"; then echo "no secrets here" >&2; exit 2; fi; '
                            'echo "branch: main"',
                        )
                    ]
                }
            ]
        },
    )
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, sim):
            out = await s.submit("read a")
            assert not out.blocked
            # The context is its own block after the prompt, not part of the prompt's text; the simulator
            # reads past it and stays on its script.
            assert [b["text"] for b in s.messages[0]["content"]] == [
                "read a",
                "<system-reminder>\nUserPromptSubmit hook success: branch: main\n</system-reminder>",
            ]
            assert sim.statistics().engine.fallbacks == 0
            before, requests = len(s.messages), sim.statistics().engine.requests
            out = await s.submit("write the secret")
            assert out.blocked == "no secrets here" and out.result is None
            assert len(s.messages) == before and sim.statistics().engine.requests == requests  # nothing sent
            assert not (root / "secret.txt").exists()

    trio.run(main)
    assert [e["prompt"] for e in logged(log)] == ["read a", "write the secret"]


def test_stop_hook_exit_2_keeps_the_turn_going_once(tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    # Refuses to stop unless it already did once in this turn (stop_hook_active), as hook authors must.
    root, log = project(
        tmp_path,
        {
            "Stop": [
                {
                    "hooks": [
                        command(
                            log,
                            'tail -n 1 "' + str(log) + '" | grep -q \'"stop_hook_active": true\' && exit 0; '
                            'echo "run the tests before you stop" >&2; exit 2',
                        )
                    ]
                }
            ]
        },
    )

    async def main() -> None:
        async with session(root, []) as (s, _):
            out = await s.submit("read a")
            assert out.result is not None and len(out.result.responses) == 3  # tool call, answer, one more
            texts = [b.get("text", "") for m in s.messages for b in m["content"] if m["role"] == "user"]
            assert (
                sum(
                    t.startswith("<system-reminder>\n")
                    and "Stop hook feedback:\n[" in t
                    and t.endswith("]: run the tests before you stop\n</system-reminder>")
                    for t in texts
                )
                == 1
            )

    trio.run(main)
    assert [e["stop_hook_active"] for e in logged(log)] == [False, True]
