"""Hook JSON output in the main loop, as Claude Code 2.1.332 reads it (docs/claude-code.md, "Hooks"): the
permission decision and the rules around it, updatedInput, context and block reasons for the model,
continue: false, and output that does not validate. Real hooks, sessions on the simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from speculate.agent_types import summarize

from .hook_kit import command, hook_events, logged, on, pre, prints, project, reminders, session


def asker(answer: str, asked: list[tuple[str, str]]) -> Any:
    async def ask(tool: str, summary: str) -> Any:
        asked.append((tool, summary))
        return answer

    return ask


def test_a_json_deny_refuses_the_call_with_its_reason(tmp_path: Path) -> None:
    root, _log = project(
        tmp_path,
        on(
            "PreToolUse",
            command(
                tmp_path / "h.log",
                prints(
                    pre(permissionDecision="deny", permissionDecisionReason="secrets stay out of the tree")
                ),
            ),
            matcher="Write",
        ),
    )
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, _):
            await s.submit("write the secret")
            assert not (root / "secret.txt").exists()
            (result,) = s.messages[2]["content"]
            assert (
                result["is_error"]
                and result["content"] == "PreToolUse:Write hook error: secrets stay out of the tree"
            )

    trio.run(main)
    (ran,) = hook_events(events)
    assert (
        ran.blocked
        and ran.decision == "deny"
        and ran.reason == "secrets stay out of the tree"
        and not ran.failed
    )


def test_allow_answers_the_prompt_but_not_a_deny_or_an_ask_rule(tmp_path: Path) -> None:
    allow = command(tmp_path / "h.log", prints(pre(permissionDecision="allow")))
    root, _ = project(
        tmp_path,
        on("PreToolUse", allow),
        permissions={"deny": ["Read(a.txt)", "Bash(echo nope:*)"], "ask": ["Bash(echo:*)"]},
    )
    asked: list[tuple[str, str]] = []

    async def main() -> None:
        async with session(root, [], mode="default", ask=asker("n", asked)) as (s, _):
            await s.submit(
                "write the secret"
            )  # default mode asks before a write; the hook answered for the user
            assert (root / "secret.txt").read_text() == "s3cret\n" and asked == []
            await s.submit("run echo")  # an ask rule still asks
            assert asked == [("Bash", "Bash(echo one)")]
            assert s.messages[-2]["content"][0]["content"] == "Permission denied: the user declined this call"
            await s.submit("read a")  # a deny rule on a file path refuses before any hook runs
            assert s.messages[-2]["content"][0]["is_error"]
            await s.submit("run false")  # a deny rule on a command: the hook runs, then the rule refuses
            assert s.messages[-2]["content"][0]["content"].startswith("Permission denied")
            assert len(asked) == 1

    trio.run(main)
    assert [e["tool_name"] for e in logged(tmp_path / "h.log")] == ["Write", "Bash", "Bash"]


def test_ask_asks_even_where_the_rules_allow_and_a_decision_it_cannot_read_asks_too(tmp_path: Path) -> None:
    root, _ = project(
        tmp_path,
        {
            "PreToolUse": [
                {
                    "matcher": "Write",
                    "hooks": [
                        {
                            "type": "command",
                            "command": prints(
                                pre(permissionDecision="ask", permissionDecisionReason="a secret?")
                            ),
                        }
                    ],
                },
                {
                    "matcher": "Bash",
                    "hooks": [{"type": "command", "command": prints(pre(permissionDecision="Deny"))}],
                },
            ]
        },
    )
    asked: list[tuple[str, str]] = []
    events: list = []

    async def main() -> None:
        async with session(root, events, ask=asker("y", asked)) as (s, _):  # acceptEdits: a Write never asks
            await s.submit("write the secret")
            # as the question shows it (a path past 80 characters, in a long TMPDIR, is shortened)
            assert asked == [("Write", summarize("Write", {"file_path": f"{root.resolve()}/secret.txt"}))]
            assert (root / "secret.txt").read_text() == "s3cret\n"
            await s.submit("run echo")  # "Deny" is not a decision: the user is asked (Claude Code ran it)
            assert asked[-1] == ("Bash", "Bash(echo one)")

    trio.run(main)
    bad = hook_events(events)[-1]
    assert bad.parsed.problems and "permissionDecision" in bad.parsed.problems[0]


def test_updated_input_is_what_runs_and_what_post_hooks_see(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    root, _ = project(
        tmp_path,
        {
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [
                        {
                            "type": "command",
                            "command": prints(
                                pre(permissionDecision="allow", updatedInput={"command": "echo two"})
                            ),
                        }
                    ],
                },
                {
                    "matcher": "Write",
                    "hooks": [
                        {"type": "command", "command": prints(pre(updatedInput={"content": "no path"}))}
                    ],
                },
            ],
            "PostToolUse": [{"matcher": "Bash", "hooks": [command(log, "true")]}],
        },
    )

    async def main() -> None:
        async with session(root, []) as (s, _):
            await s.submit("run echo")
            use, (result,) = s.messages[1]["content"][0], s.messages[2]["content"]
            assert use["input"] == {
                "command": "echo one"
            }  # what the model asked for stays in the conversation
            assert result["content"] == "two" and not result.get("is_error")
            await s.submit("write the secret")  # an updatedInput replaces the input: this one has no path
            (result,) = s.messages[-2]["content"]
            assert result["is_error"] and "updatedInput that is not valid for the tool" in result["content"]
            assert not (root / "secret.txt").exists()

    trio.run(main)
    (sent,) = logged(log)
    assert sent["tool_input"] == {"command": "echo two"} and sent["tool_response"]["stdout"] == "two"


def test_context_and_block_reasons_reach_the_model_after_the_results(tmp_path: Path) -> None:
    post_cmd = prints(
        {
            "decision": "block",
            "reason": "a.txt is generated",
            "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "see a.in"},
        }
    )
    root, _ = project(
        tmp_path,
        {
            "PreToolUse": [
                {"hooks": [{"type": "command", "command": prints(pre(additionalContext="checked by pre"))}]}
            ],
            "PostToolUse": [{"hooks": [{"type": "command", "command": post_cmd}]}],
        },
    )

    async def main() -> None:
        async with session(root, []) as (s, sim):
            await s.submit("read a")
            result, _ = s.messages[2]["content"]
            assert result["content"] == "     1\talpha"  # the result as the tool gave it
            assert reminders(s.messages[2]) == [
                "\n\n".join(
                    [
                        "PreToolUse:Read hook additional context: checked by pre",
                        f'PostToolUse:Read hook blocking error from command: "{post_cmd}": a.txt is generated',
                        "PostToolUse:Read hook additional context: see a.in",
                    ]
                )
            ]
            assert sim.statistics().engine.fallbacks == 0

    trio.run(main)


def test_prompt_context_json_and_a_json_block(tmp_path: Path) -> None:
    root, _ = project(
        tmp_path,
        on(
            "UserPromptSubmit",
            {
                "type": "command",
                "command": (
                    "if grep -q secret; then "
                    + prints({"decision": "block", "reason": "no secrets"})
                    + "; fi; "
                    + prints(
                        {
                            "hookSpecificOutput": {
                                "hookEventName": "UserPromptSubmit",
                                "additionalContext": "branch: main",
                            },
                            "systemMessage": "context added",
                        }
                    )
                ),
            },
        ),
    )
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, sim):
            out = await s.submit("read a")
            assert reminders(s.messages[0]) == ["UserPromptSubmit hook additional context: branch: main"]
            assert s.messages[0]["content"][0]["text"] == "read a" and sim.statistics().engine.fallbacks == 0
            out = await s.submit("write the secret")
            assert out.blocked == "no secrets" and not (root / "secret.txt").exists()

    trio.run(main)
    first = hook_events(events)[0]
    assert first.shown == "context added"  # the user sees the systemMessage, not the JSON


def test_a_stop_hooks_json_block_keeps_the_turn_going(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    root, _ = project(
        tmp_path,
        on(
            "Stop",
            command(
                log,
                (
                    f'tail -n 1 "{log}" | grep -q \'"stop_hook_active": true\' && exit 0; '
                    + prints({"decision": "block", "reason": "run the tests first"})
                ),
            ),
        ),
    )

    async def main() -> None:
        async with session(root, []) as (s, _):
            out = await s.submit("read a")
            assert out.result is not None and out.result.stop_hooks_blocked == 1
            assert any(
                r.endswith("Stop hook feedback:\nrun the tests first")
                for m in s.messages
                if m["role"] == "user"
                for r in reminders(m)
            )

    trio.run(main)
    sent = logged(log)
    assert [e["stop_hook_active"] for e in sent] == [False, True]
    assert sent[0]["last_assistant_message"] == "Done."


def test_continue_false_ends_the_turn_after_the_call_and_the_next_request_says_why(tmp_path: Path) -> None:
    root, _ = project(
        tmp_path,
        {
            "PostToolUse": [
                {
                    "matcher": "Read",
                    "hooks": [
                        {
                            "type": "command",
                            "command": prints({"continue": False, "stopReason": "out of budget"}),
                        }
                    ],
                }
            ],
            "UserPromptSubmit": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": (
                                'grep -q "run echo" && '
                                + prints({"continue": False, "stopReason": "not now"})
                                + "; true"
                            ),
                        }
                    ]
                }
            ],
        },
    )

    async def main() -> None:
        async with session(root, []) as (s, _):
            out = await s.submit("read a")
            assert out.stopped == "PostToolUse:Read hook stopped continuation: out of budget"
            assert out.result is not None and len(out.result.responses) == 1  # no request after the call
            assert reminders(s.messages[-1]) == ["PostToolUse:Read hook stopped continuation: out of budget"]
            out = await s.submit("run echo")  # the prompt is kept, no request is made
            assert out.stopped == "not now" and out.result is not None and out.result.responses == []
            assert s.messages[-2]["content"][-2]["text"] == "run echo"
            assert "Operation stopped by hook: not now" in s.messages[-2]["content"][-1]["text"]
            assert s.messages[-1] == {
                "role": "assistant",
                "content": [{"type": "text", "text": "No response requested."}],
            }

    trio.run(main)


def test_json_counts_on_any_exit_but_2_and_bad_json_is_text_with_a_problem(tmp_path: Path) -> None:
    root, _ = project(
        tmp_path,
        {
            "PreToolUse": [
                {
                    "matcher": "Read",
                    "hooks": [
                        {
                            "type": "command",
                            "command": prints(
                                pre(permissionDecision="deny", permissionDecisionReason="denied on exit 1"),
                                code=1,
                                err="oops",
                            ),
                        }
                    ],
                },
                {
                    "matcher": "Bash",
                    "hooks": [
                        {
                            "type": "command",
                            "command": prints(pre(permissionDecision="allow"), code=2, err="exit 2 wins"),
                        }
                    ],
                },
            ],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo '{not json'"}]}],
        },
    )
    events: list = []

    async def main() -> None:
        async with session(root, events) as (s, _):
            await s.submit("read a")  # as Claude Code 2.1.332 does: the deny of a hook that exited 1 applies
            assert s.messages[2]["content"][0]["content"] == "PreToolUse:Read hook error: denied on exit 1"
            await s.submit("run echo")  # exit 2: stderr decides, its JSON is not read
            assert s.messages[-2]["content"][0]["content"].endswith("]: exit 2 wins")
            assert reminders(s.messages[0]) == ["UserPromptSubmit hook success: {not json"]

    trio.run(main)
    ran = hook_events(events)
    assert ran[0].parsed.problems[0].startswith("stdout starts like JSON but is not")
    assert ran[1].failed and ran[1].blocked  # exit 1: a warning for the user, and its deny
