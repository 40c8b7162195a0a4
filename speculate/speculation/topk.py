"""Top-K speculation: the forks of one cycle, one per candidate suggestion the policy chose to run.

Each fork has its own overlay, sandbox and cancel scope; all share the parent's prompt cache (same key and
prefix) and two budgets from settings (``speculation.budget``): ``tokens``, what the K forks of a cycle may
spend together (past it, the lowest-ranked fork still running is stopped at the ``budget`` boundary: what it
did so far stays acceptable, as at any boundary), and ``cpus``, how many sandboxed commands they may run at
once (a capacity limiter around each fork's shell). Accepting a candidate keeps its fork and discards the
others (:meth:`ForkSet.choose`); ignoring the suggestion discards them all. With K = 1 there is one fork and
no budget, as before top-K.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from speculate.speculation.fork import Speculation


class ForkSet:
    """The forks of the current cycle, by rank."""

    def __init__(self, *, token_budget: int | None = None, cpus: int | None = None) -> None:
        self.forks: list[Speculation] = []
        self.token_budget = token_budget
        self.limiter = trio.CapacityLimiter(cpus) if cpus else None

    def add(self, spec: Speculation) -> Speculation:
        self.forks.append(spec)
        return spec

    def find(self, prompt: str) -> Speculation | None:
        return next((f for f in self.forks if f.suggestion == prompt), None)

    def choose(self, prompt: str) -> tuple[Speculation | None, list[Speculation]]:
        """The fork that ran ``prompt`` (None: that candidate was not forked) and the others, which leave
        the set (the caller stops and discards them)."""
        chosen = self.find(prompt)
        others = [f for f in self.forks if f is not chosen]
        self.forks = [chosen] if chosen is not None else []
        return chosen, others

    def take_all(self) -> list[Speculation]:
        out, self.forks = self.forks, []
        return out

    def tokens(self) -> int:
        return sum(sum(f.usage.as_dict().values()) for f in self.forks)

    def over_budget(self) -> Speculation | None:
        """The fork to stop now: the K forks together passed the token budget, and this is the lowest-ranked
        one still running (None: within budget, or nothing left to stop)."""
        if self.token_budget is None or self.tokens() <= self.token_budget:
            return None
        running = [f for f in self.forks if not f.finished.is_set() and not f.scope.cancel_called]
        return max(running, key=lambda f: f.rank) if running else None

    def wrap_shell(self, shell: Any) -> Any:
        return shell if self.limiter is None else LimitedShell(shell, self.limiter)


class LimitedShell:
    """A fork's shell whose commands take a slot of the forks' shared CPU budget while they run."""

    def __init__(self, inner: Any, limiter: trio.CapacityLimiter) -> None:
        self.inner = inner
        self.limiter = limiter

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        async with self.limiter:
            return await self.inner.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # everything else is the sandbox shell's
        return getattr(self.inner, name)


async def run_fork(spec: Speculation, body: Callable[[Speculation], Awaitable[None]]) -> None:
    """Run one fork in its own cancel scope. Stopped from outside (the budget, another candidate accepted,
    the cycle cancelled), it counts as finished where it stood, so whoever waits for it goes on."""
    try:
        with spec.scope:
            await body(spec)
    finally:
        if not spec.finished.is_set():
            if spec.finished_at is None:
                spec.finished_at = time.perf_counter()
            spec.finished.set()
            spec.next_ready.set()
        spec.exited.set()


async def run_forks(specs: Sequence[Speculation], body: Callable[[Speculation], Awaitable[None]]) -> None:
    """Run the forks in parallel (one: in this task, exactly as before top-K)."""
    try:
        if len(specs) == 1:
            await run_fork(specs[0], body)
            return
        async with trio.open_nursery() as n:
            for spec in specs:
                n.start_soon(run_fork, spec, body)
    finally:
        for spec in specs:  # tasks that never started (the cycle was cancelled first) are over too
            spec.exited.set()
