"""The ``claude-cli`` backend: the :class:`Model` interface on the ``claude`` CLI, for Claude subscribers.

Each request is one ``claude -p --output-format stream-json`` run with the CLI's own tools off (``--tools ""``)
and one model call (``--max-turns 1``): the CLI only produces text; tools travel as text (:mod:`.text_tools`)
and our agent runs them, through the overlay and sandbox in a fork as with the API backend.

Session caching: a run prints its CLI session id; we remember it for the conversation it now holds (our
messages up to and including the answer). A later request that extends a remembered conversation resumes
that session (``--resume <id>``) and sends only the new messages, so the CLI's prompt cache covers the rest.
Every resume adds ``--fork-session``: the run branches into a new session id and the remembered one never
changes, so the main loop's next turn, the suggestion and a speculative fork can all continue the same point
(in any order, at once) and all read its cache. (A plain ``--resume`` would append to the session: a
suggestion run first would then sit in the history of the next turn.)

Timeouts: the CLI retries a failed request ten times by default, silently (175 s on a dead endpoint).
Unless the environment sets them, each run gets ``API_TIMEOUT_MS`` (``read_timeout_s``, default 60 s) and
``CLAUDE_CODE_MAX_RETRIES`` (``stall_attempts - 1``, default 1), and the whole run is bounded by
``timeout_s``; a failure names them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from pydantic import BaseModel

from speculate.models.anthropic import READ_TIMEOUT_S, STALL_ATTEMPTS
from speculate.models.base import (
    BlockDone,
    CacheKey,
    Done,
    ModelError,
    ModelResponse,
    StreamUpdate,
    TextDelta,
    Usage,
)
from speculate.models.text_tools import extract, feedback, render, tools_reminder
from speculate.types import Message


def _digest(key: CacheKey, messages: Sequence[Message]) -> str:
    data = json.dumps([key.model, key.system, key.tools_json, list(messages)], sort_keys=True, default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def _events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # not an event (a warning the CLI printed)
        if isinstance(event, dict):
            out.append(event)
    return out


@dataclass(frozen=True)
class _Session:
    id: str
    invalid: tuple[str, ...] = ()  # calls dropped from its last answer, reported with the next request


class ClaudeCliModel:
    """``binary``: the ``claude`` executable; ``env``: its environment (None: ours); ``cwd``: where it runs (the
    CLI keeps sessions per directory, so every run of one model uses the same one); ``validators``: input
    models by tool name (default: the built-in tools'). A call is accepted only for a tool the request's key
    offers (MCP tools by name, wholly denied tools not at all)."""

    name = "claude-cli"

    def __init__(
        self,
        *,
        binary: str | os.PathLike[str] = "claude",
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        validators: Mapping[str, type[BaseModel] | None] | None = None,
        timeout_s: float = 600.0,
        read_timeout_s: float = READ_TIMEOUT_S,
        stall_attempts: int = STALL_ATTEMPTS,
    ) -> None:
        self.binary, self.timeout_s = str(binary), timeout_s
        base = dict(env) if env is not None else dict(os.environ)
        # The user's own values win; ours bound a dead or silent endpoint.
        self.limits = {
            "API_TIMEOUT_MS": base.get("API_TIMEOUT_MS") or str(int(read_timeout_s * 1000)),
            "CLAUDE_CODE_MAX_RETRIES": base.get("CLAUDE_CODE_MAX_RETRIES") or str(max(stall_attempts - 1, 0)),
        }
        self.env = {**base, **self.limits}
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        if validators is None:
            from speculate.tools import default_tools

            validators = {t.name: t.Input for t in default_tools()}
        self.validators = dict(validators)
        self.sessions: dict[str, _Session] = {}
        self.runs: list[list[str]] = []  # the argument lists used, newest last (for tests and figures)

    async def __aenter__(self) -> ClaudeCliModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def _limits_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.limits.items())

    def _resume_point(self, key: CacheKey, messages: Sequence[Message]) -> tuple[int, _Session | None]:
        for k in range(len(messages) - 1, 0, -1):
            if messages[k - 1]["role"] == "assistant" and (
                s := self.sessions.get(_digest(key, messages[:k]))
            ):
                return k, s
        return 0, None

    def _prompt(self, key: CacheKey, messages: Sequence[Message], k: int, session: _Session | None) -> str:
        tools = [json.loads(t) for t in key.tools_json]
        if session is None:
            head = tools_reminder(tools) if tools else ""
            return "\n".join(p for p in (head, render(messages)) if p)
        body = render(messages[k:], before=messages[k - 1])
        return f"{feedback(session.invalid)}\n{body}" if session.invalid else body

    def _args(self, key: CacheKey, prompt: str, session: _Session | None) -> list[str]:
        args = [self.binary, "-p", "--output-format", "stream-json", "--verbose", "--tools", "",
                "--max-turns", "1", "--setting-sources", "", "--strict-mcp-config", "--model", key.model,
                "--system-prompt", "\n\n".join(key.system)]  # fmt: skip
        if session is not None:
            args += ["--resume", session.id, "--fork-session"]
        return [*args, "--", prompt]

    async def stream(
        self, key: CacheKey, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncGenerator[StreamUpdate, None]:
        # max_tokens: the CLI has no output cap flag; a suggestion's cap is not applied here.
        if not messages or messages[-1]["role"] != "user":
            raise ModelError("claude-cli: the conversation must end with a user message")
        k, session = self._resume_point(key, messages)
        args = self._args(key, self._prompt(key, messages, k, session), session)
        self.runs.append(args)
        t0 = time.perf_counter()
        with trio.move_on_after(self.timeout_s) as scope:
            try:
                proc = await trio.run_process(
                    args,
                    cwd=self.cwd,
                    env=self.env,
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    stdin=b"",
                )
            except OSError as e:  # not installed, not executable, cwd gone
                raise ModelError(f"claude-cli: cannot run {self.binary!r} in {self.cwd}: {e}") from None
        if scope.cancelled_caught:
            raise ModelError(f"claude-cli: no answer within {self.timeout_s:.0f} s ({self._limits_text()})")
        events = _events(proc.stdout.decode(errors="replace"))
        # Calls are checked against the tools this key offers (MCP tools included, wholly denied ones not).
        offered = {json.loads(t)["name"]: None for t in key.tools_json}
        validators = {name: self.validators.get(name) for name in offered}
        resp, new_id, invalid = self._response(events, proc, t0, validators)
        text = "".join(b["text"] for b in resp.message["content"] if b["type"] == "text")
        if text:
            yield TextDelta(0, text)
        for i, b in enumerate(resp.message["content"]):
            yield BlockDone(i, b)
        self.sessions[_digest(key, [*messages, resp.message])] = _Session(new_id, invalid=tuple(invalid))
        yield Done(resp)

    def _response(
        self,
        events: list[dict[str, Any]],
        proc: Any,
        t0: float,
        validators: Mapping[str, type[BaseModel] | None],
    ) -> tuple[ModelResponse, str, list[str]]:
        result = next((e for e in events if e.get("type") == "result"), None)
        if result is None or result.get("is_error") or proc.returncode != 0:
            why = (
                (result or {}).get("result")
                or proc.stderr.decode()[-500:].strip()
                or f"exit {proc.returncode}"
            )
            raise ModelError(f"claude-cli failed: {why} ({self._limits_text()})")
        answer = "".join(
            b.get("text", "")
            for e in events
            if e.get("type") == "assistant"
            for b in e["message"].get("content") or []
            if b.get("type") == "text"
        )
        got = extract(answer, validators)
        content: list[dict[str, Any]] = [{"type": "text", "text": got.text}] if got.text else []
        content += got.uses
        u = result.get("usage") or {}
        usage = Usage(
            u.get("input_tokens", 0),
            u.get("output_tokens", 0),
            u.get("cache_creation_input_tokens", 0),
            u.get("cache_read_input_tokens", 0),
        )
        model = next((e["message"].get("model", "") for e in events if e.get("type") == "assistant"), "")
        total = time.perf_counter() - t0
        resp = ModelResponse(
            {"role": "assistant", "content": content},
            "tool_use" if got.uses else "end_turn",
            usage,
            model=model,
            ttft_s=total,
            total_s=total,
            raw_events=events,
        )
        return resp, str(result.get("session_id", "")), got.invalid
