"""Choosing a model backend by name from :data:`MODEL_BACKENDS` (the one place that knows the names): the
embedded simulator (default, started and stopped here) or a real Anthropic-compatible endpoint, both through
the anthropic SDK (:class:`AnthropicModel`); or ``claude-cli``, the ``claude`` CLI of a Claude subscription
with text-based tool calling (:mod:`speculate.models.claude_cli`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speculate.models.anthropic import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, STALL_ATTEMPTS, AnthropicModel


@dataclass(kw_only=True)
class BackendConfig:
    backend: str = "sim"  # sim | anthropic | claude-cli
    base_url: str | None = None  # for anthropic: any compatible server; None = api.anthropic.com
    api_key: str | None = None
    scenarios: Sequence[Path] = ()  # sim: scenario files (default: the bundled ones)
    seed: int = 0
    hit_rate: float | None = None  # sim: forced share of suggestions that are the user's next intent
    time_scale: float = 1.0  # sim: 1.0 = real time
    faults: Any = None  # sim: speculate.sim FaultConfig
    realism: Any = None  # sim: speculate.sim.realism Realism (a less ideal API), None for the ideal one
    record: Path | None = None  # anthropic: save every request/response with timings (a replayable trace)
    trace: Path | None = None  # sim: serve a recorded trace
    claude_binary: Path | None = None  # claude-cli: the executable (None: `claude` on PATH, else ours)
    # claude-cli: run the CLI against the embedded simulator (scenarios, seed, hit rate and time scale as for
    # sim) with a scratch HOME, removed on exit; what `speculate bench --model claude-cli` does.
    simulate: bool = False
    # Every backend: seconds to connect, seconds without a byte, tries of a request that stalls
    # (speculate.models.anthropic; the claude-cli backend passes them to the CLI as API_TIMEOUT_MS and
    # CLAUDE_CODE_MAX_RETRIES); ``on_notice`` hears each retry.
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S
    stall_attempts: int = STALL_ATTEMPTS
    on_notice: Any = None

    def timeouts(self) -> dict[str, Any]:
        return {
            "connect_timeout_s": self.connect_timeout_s,
            "read_timeout_s": self.read_timeout_s,
            "stall_attempts": self.stall_attempts,
            "on_notice": self.on_notice,
        }


@dataclass(frozen=True)
class ModelBackend:
    """One model backend: how to open it for a :class:`BackendConfig`, and whether it is the simulator
    (whose time scale and scenarios apply)."""

    name: str
    open: Callable[[BackendConfig], AbstractAsyncContextManager[Any]]
    simulator: bool = False
    # A client that, given no endpoint, runs against an embedded simulator of its own (``cfg.simulate``).
    starts_simulator: bool = False

    def on_simulator(self, base_url: str | None) -> bool:
        """Does this backend, with this endpoint (None: none given), serve from the embedded simulator?"""
        return self.simulator or (self.starts_simulator and base_url is None)


@asynccontextmanager
async def open_model(cfg: BackendConfig) -> AsyncIterator[Any]:
    """The model ``cfg.backend`` names, open until the block ends. Raises ValueError for an unknown name."""
    backend = MODEL_BACKENDS.get(cfg.backend)
    if backend is None:
        *rest, last = map(repr, MODEL_BACKENDS)
        raise ValueError(f"unknown backend {cfg.backend!r}: expected {', '.join(rest)} or {last}")
    async with backend.open(cfg) as m:
        yield m


def is_simulator(name: str) -> bool:
    """Does the model backend called ``name`` (perhaps read from a record: unknown is False) serve from the
    embedded simulator?"""
    backend = MODEL_BACKENDS.get(name)
    return backend is not None and backend.simulator


@asynccontextmanager
async def _open_sim(cfg: BackendConfig) -> AsyncIterator[Any]:
    from speculate.sim.server import SimServer

    kwargs: dict[str, Any] = {"seed": cfg.seed, "hit_rate": cfg.hit_rate, "time_scale": cfg.time_scale}
    sources = [*cfg.scenarios, *([cfg.trace] if cfg.trace is not None else [])]
    if sources:
        kwargs["scenarios"] = sources  # .yaml scenarios and .jsonl recorded traces
    if cfg.faults is not None:
        kwargs["faults"] = cfg.faults
    if cfg.realism is not None:
        kwargs["realism"] = cfg.realism
    with SimServer(**kwargs) as sim:
        async with AnthropicModel(base_url=sim.base_url, api_key="sim", name="sim", **cfg.timeouts()) as m:
            yield m


@asynccontextmanager
async def _open_anthropic(cfg: BackendConfig) -> AsyncIterator[Any]:
    key = cfg.api_key or os.environ.get("ANTHROPIC_API_KEY")
    if not key and cfg.base_url is None:
        raise ValueError("--model anthropic needs ANTHROPIC_API_KEY (or --base-url for a local server)")
    with ExitStack() as stack:
        recorder = None
        if cfg.record is not None:
            from speculate.sim.replay import TraceWriter

            writer = stack.enter_context(TraceWriter(cfg.record))

            def recorder(
                request: dict[str, Any], response: dict[str, Any], timings: dict[str, float]
            ) -> None:
                writer.write(request, response, ttft_s=timings["ttft_s"], total_s=timings["total_s"])

        async with AnthropicModel(
            base_url=cfg.base_url, api_key=key, recorder=recorder, name="anthropic", **cfg.timeouts()
        ) as m:
            yield m


@asynccontextmanager
async def _open_claude_cli(cfg: BackendConfig) -> AsyncIterator[Any]:
    if cfg.simulate:
        async with _claude_cli_on_sim(cfg) as m:
            yield m
    else:
        yield _claude_cli(cfg)


@asynccontextmanager
async def _claude_cli_on_sim(cfg: BackendConfig) -> AsyncIterator[Any]:
    import shutil

    from speculate.models.claude_cli import ClaudeCliModel
    from speculate.sim.claude_code import ClaudeCode
    from speculate.sim.server import SimServer
    from speculate.tempfiles import temp_dir

    binary: Path | str = cfg.claude_binary or ClaudeCode.locate()  # ours first: the pinned version
    if isinstance(binary, str):
        raise ValueError(f"--model claude-cli on the simulator: {binary}")
    kwargs: dict[str, Any] = {"seed": cfg.seed, "hit_rate": cfg.hit_rate, "time_scale": cfg.time_scale}
    if cfg.scenarios:
        kwargs["scenarios"] = list(cfg.scenarios)
    scratch = temp_dir("claude-cli")
    try:
        (scratch / "home").mkdir()
        (scratch / "cwd").mkdir()
        with SimServer(**kwargs) as sim:
            env = ClaudeCode(binary, home=scratch / "home").env(sim.base_url)
            yield ClaudeCliModel(
                binary=binary,
                env=env,
                cwd=scratch / "cwd",
                read_timeout_s=cfg.read_timeout_s,
                stall_attempts=cfg.stall_attempts,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _claude_cli(cfg: BackendConfig) -> Any:
    import shutil

    from speculate.models.claude_cli import ClaudeCliModel
    from speculate.sim.claude_code import ClaudeCode

    binary: Path | str | None = cfg.claude_binary or shutil.which("claude")
    if binary is None:
        binary = ClaudeCode.locate()  # the one scripts/setup.sh installs, or why there is none
        if isinstance(binary, str):
            raise ValueError(f"--model claude-cli: no `claude` on PATH, and {binary}")
    env = None
    if cfg.base_url is not None:  # e.g. `speculate sim serve`: the CLI talks to it instead of Anthropic
        env = {**os.environ, "ANTHROPIC_BASE_URL": cfg.base_url}
    cwd = Path.home() / ".cache" / "speculate" / "claude-cli"  # the CLI keeps its sessions per directory
    cwd.mkdir(parents=True, exist_ok=True)
    return ClaudeCliModel(
        binary=binary, env=env, cwd=cwd, read_timeout_s=cfg.read_timeout_s, stall_attempts=cfg.stall_attempts
    )


MODEL_BACKENDS: dict[str, ModelBackend] = {
    b.name: b
    for b in (
        ModelBackend("sim", _open_sim, simulator=True),
        ModelBackend("anthropic", _open_anthropic),
        ModelBackend("claude-cli", _open_claude_cli, starts_simulator=True),
    )
}
