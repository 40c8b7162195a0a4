"""Long sessions on the simulator with a small context window: auto-compaction, the circuit breaker,
/compact, the window enforced with the API's error, and speculation near the threshold."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.compaction import CONTINUATION, MAX_FAILURES, CompactionFailed, Compactor, context_tokens
from speculate.models.anthropic import AnthropicModel
from speculate.models.base import Usage
from speculate.models.profiles import PROFILES
from speculate.session import Session, SessionConfig, TurnOutcome, open_session
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.script import FALLBACK_PREFIX
from speculate.sim.server import SimServer

MODEL = "claude-sonnet-4-6"
N = 6
# Each file is ~3,000 tokens (the simulator counts ceil(chars / 4)); six turns each read one.
FILES = {
    f"f{i}.txt": "".join(f"line {j} of file {i}: some words to fill the context\n" for j in range(220))
    for i in range(1, N + 1)
}
LONG_ANSWER = " ".join(["This answer is long so that the output alone adds tokens to the context."] * 20)


def scenario(*, long_answer: bool = False) -> str:
    turns = []
    for i in range(1, N + 1):
        nxt = f'"read file {i + 1}"' if i < N else "null"
        answer = LONG_ANSWER if long_answer and i == 1 else f"File {i} read."
        turns.append(f"""
  - prompt: "read file {i}"
    steps:
      - tools:
          - Read: {{file_path: "{{root}}/f{i}.txt"}}
      - text: "{answer}"
    suggestion: {nxt}""")
    return "name: long-session\nturns:" + "".join(turns) + "\n"


@asynccontextmanager
async def long_session(
    tmp: Path, *, window: int, long_answer: bool = False, **cfg: Any
) -> AsyncIterator[Session]:
    root = tmp / "proj"
    root.mkdir(parents=True)
    for name, text in FILES.items():
        (root / name).write_text(text)
    profiles = tuple(replace(p, context_window=window) if p.name == MODEL else p for p in PROFILES)
    with SimServer(
        [parse_scenario(scenario(long_answer=long_answer))], time_scale=0.01, profiles=profiles
    ) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="x", backoff_s=0.01) as model:
            config = SessionConfig(
                project=root,
                model=model,
                model_name=MODEL,
                context_window=window,
                events_path=tmp / "events.jsonl",
                **cfg,
            )
            async with open_session(config) as s:
                yield s


def trio_test(fn: Any) -> Any:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        trio.run(functools.partial(fn, *args, **kwargs))

    return run


def suggestions(tmp: Path) -> list[dict[str, Any]]:
    lines = (tmp / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("kind") == "suggestion"]


def cache_read_share(out: TurnOutcome) -> float:
    """Cache reads over all input of the turn's requests: the fork's when accepted, plus the normal loop's."""
    u = out.result.usage if out.result is not None else Usage()
    if out.accepted and out.speculation is not None:
        u = u.add(Usage(**out.speculation.tokens))
    return u.cache_read_input_tokens / u.total_input


@trio_test
async def test_without_compaction_the_simulator_refuses_with_prompt_is_too_long(tmp_path: Path) -> None:
    async with long_session(tmp_path, window=16_000, speculate=False, auto_compact=False) as s:
        errors = [(await s.submit(f"read file {i}")).error for i in range(1, N + 1)]
    failed = [e for e in errors if e]
    assert failed, "the conversation outgrew the window without an error"
    assert "prompt is too long" in failed[0] and "16000 maximum" in failed[0]


@trio_test
async def test_auto_compaction_continues_the_session_from_the_summary(tmp_path: Path) -> None:
    async with long_session(tmp_path, window=16_000, compact_margin=6_000) as s:
        outcomes = []
        for i in range(1, N + 1):
            out = await s.submit(f"read file {i}")
            outcomes.append(out)
            assert not out.error, out.error
            assert out.text == f"File {i} read.", out.text  # the scenario goes on after each compaction
            await s.wait_speculation()
        compacted = [i for i, o in enumerate(outcomes, start=1) if "compacted" in o.note]
        assert compacted, [o.note for o in outcomes]
        first = compacted[0]
        assert first > 1
        records = [r for r in s.compactor.records if r.ok]
        assert len(records) == len(compacted) and records[0].tokens_before >= s.compactor.threshold
        # The summary request extends the conversation on the same key: it reads the last turn's cache.
        assert records[0].usage.cache_read_input_tokens > 0
        head = s.messages[0]["content"][0]["text"]
        assert head.startswith(CONTINUATION.split("{")[0]) and "read file" in head
        assert FALLBACK_PREFIX not in head
        # Near the threshold the suggestion was suppressed with its own reason; after it, suggestions resume.
        reasons = [e["reason"] for e in suggestions(tmp_path) if e["outcome"] == "suppressed"]
        assert "context_limit" in reasons
        assert s.statistics()["compactions"] == len(compacted)


@trio_test
async def test_after_compaction_suggestion_and_fork_share_the_new_prefix(tmp_path: Path) -> None:
    async with long_session(tmp_path, window=16_000, compact_margin=6_000, fork_headroom=500) as s:
        for i in range(1, N + 1):
            await s.submit(f"read file {i}")
            await s.wait_speculation()
            if "compacted" in s.outcomes[-1].note:
                break
        first = len(s.outcomes)
        assert first < N, "no compaction happened"
        for i in range(first + 1, min(first + 3, N) + 1):
            assert await s.wait_suggestion() == f"read file {i}"
            out = await s.submit(f"read file {i}")
            assert out.accepted and out.text == f"File {i} read."
            await s.wait_speculation()
        shares = [round(cache_read_share(o), 2) for o in s.outcomes[first - 1 :]]
        print(f"cache-read share: compaction turn then the turns after it: {shares}")
        # The turns after it run as forks on the summary's prefix and read what the turn before wrote.
        assert all(x > 0.5 for x in shares[1:]), shares


@trio_test
async def test_the_circuit_breaker_opens_after_three_failures(tmp_path: Path) -> None:
    # Measure turn 1 with a roomy window, then pick a window its last request fits in but the summary
    # request (that conversation plus its answer plus the instruction) does not: every compaction fails.
    async with long_session(tmp_path / "a", window=200_000, speculate=False, long_answer=True) as s:
        await s.submit("read file 1")
        last = s.agent_last_usage()
        assert last is not None and last.output_tokens > 300
    window = last.total_input + 100
    # (Reactive compaction, which cuts the conversation down before summarising it, would succeed: off here.)
    async with long_session(
        tmp_path / "b",
        window=window,
        compact_margin=1_000,
        speculate=False,
        long_answer=True,
        reactive_compact=False,
    ) as s:
        assert not (await s.submit("read file 1")).error
        notes = [(await s.submit("read file 2")).note for _ in range(MAX_FAILURES)]
        assert all("prompt is too long" in n for n in notes), notes
        assert "automatic compaction is off" in notes[-1] and "off" not in notes[0]
        assert s.compactor.tripped
        out = await s.submit("read file 2")  # no fourth try: the turn itself meets the window
        assert (
            len(s.compactor.records) == MAX_FAILURES and out.note == "" and "prompt is too long" in out.error
        )
        # /compact still tries on demand (and fails the same way, naming the cause).
        with pytest.raises(CompactionFailed, match="prompt is too long"):
            await s.compact()


@trio_test
async def test_manual_compact_and_a_bad_margin(tmp_path: Path) -> None:
    async with long_session(tmp_path, window=200_000, speculate=False) as s:
        with pytest.raises(CompactionFailed, match="nothing to compact"):
            await s.compact()
        assert s.compactor.failures == 0 and s.compactor.records == []
        await s.submit("read file 1")
        await s.submit("read file 2")
        rec = await s.compact()
        assert rec.ok and rec.trigger == "manual" and rec.messages_before == 8 and len(s.messages) == 1
        assert s.agent_last_usage() is None and context_tokens(None) == 0
        out = await s.submit("read file 3")
        assert out.text == "File 3 read." and len(s.messages) == 4  # summary+prompt, call, result, answer
    with pytest.raises(ValueError, match="margin 13000 must be below the context window 10000"):
        Compactor(model=None, window=10_000)  # type: ignore[arg-type]
