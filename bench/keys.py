"""One API key per session against the realistic simulator, as each user has theirs: its per-key rate limits
and latency draws (speculate/sim/realism.py) are then the session's own, shared by its main loop, suggestions
and forks, and not by the other arm of its pair."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from speculate.models.anthropic import AnthropicModel
from speculate.models.base import Model


@asynccontextmanager
async def session_model(model: Model, session_id: str, *, own_key: bool) -> AsyncIterator[Model]:
    """``model`` itself, or with ``own_key`` a client of the same server with a key of the session's own."""
    if not own_key or not isinstance(model, AnthropicModel):
        yield model
        return
    async with AnthropicModel(base_url=model.base_url, api_key=f"bench-{session_id}", name=model.name) as m:
        yield m
