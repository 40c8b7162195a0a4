"""What the API bills for a stream the client cancels: its input, and the output streamed before the cut.

A cancelled request is not free. ``message_start`` has already reported the request's input usage (uncached,
cache writes, cache reads: all billed), and the model was generating until the connection closed. A
finished response carries its usage in ``message_delta``; a cancelled one never gets there, so the client
estimates the output it received at about four characters per token (Anthropic's rule of thumb for English,
the newer tokenizer's 30% more where the model has it). That is a lower bound: the server may have generated
a little more before it noticed the cut (the simulator reports exactly what it streamed, see
:meth:`speculate.sim.server.SimServer.statistics`).

Who pays is whoever opened a :func:`billed_to` scope around the work: the speculation engine opens one per
fork and per suggestion, so a fork or a suggestion thrown away mid-request is charged what the API charges.
The scope is a context variable, so it follows the work into the model's stream (same task) and into tasks
started inside it, and nothing needs to thread a meter through the agent loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from speculate.models.base import Usage

CHARS_PER_TOKEN = 4.0
TOOL_USE_FRAMING = 8  # tokens of a tool call beyond its name and input, as the simulator counts them


@dataclass
class Meter:
    """Usage of the requests cancelled while this meter was the current one."""

    usage: Usage = field(default_factory=Usage)
    cancelled: int = 0

    def charge(self, usage: Usage) -> None:
        self.usage = self.usage.add(usage)
        self.cancelled += 1


_current: ContextVar[Meter | None] = ContextVar("speculate_billing_meter", default=None)


@contextmanager
def billed_to(meter: Meter) -> Iterator[Meter]:
    """Within this scope, cancelled requests are charged to ``meter``."""
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def charge_cancelled(usage: Usage) -> None:
    """Charge a cancelled request to the current meter (nobody's, outside a :func:`billed_to` scope)."""
    meter = _current.get()
    if meter is not None:
        meter.charge(usage)


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


def received_output_tokens(
    blocks: Sequence[dict[str, Any]], partial_json: Sequence[str] = (), *, token_scale: float = 1.0
) -> int:
    """Output tokens a cancelled stream had delivered, estimated from its blocks so far (at least 1: the API
    reports one output token in ``message_start``)."""
    n = 0
    for i, b in enumerate(blocks):
        kind = b.get("type")
        if kind == "text":
            n += _tokens(len(b.get("text", "")))
        elif kind == "thinking":
            n += _tokens(len(b.get("thinking", "")))
        elif kind in ("tool_use", "server_tool_use"):
            raw = partial_json[i] if i < len(partial_json) else ""
            n += TOOL_USE_FRAMING + _tokens(len(b.get("name", ""))) + _tokens(len(raw))
    return max(1, math.ceil(n * token_scale))


def cancelled_usage(
    started: Usage, blocks: Sequence[dict[str, Any]], partial_json: Sequence[str] = (), *, model: str = ""
) -> Usage:
    """The bill of a stream cut after ``message_start`` (whose usage is ``started``) and ``blocks``."""
    from speculate.models.profiles import find_profile

    profile = find_profile(model) if model else None
    out = received_output_tokens(blocks, partial_json, token_scale=profile.token_scale if profile else 1.0)
    return Usage(
        started.input_tokens,
        max(out, started.output_tokens),
        started.cache_creation_input_tokens,
        started.cache_read_input_tokens,
    )
