"""The prompt cache, as the Messages API documents it, as a pure structure driven by an explicit clock.

A request is cut into units at block granularity in the order tools -> system -> messages; each unit's key is
a cumulative SHA-256 over everything before it, so one differing byte anywhere earlier changes every later
key. ``tool_choice`` and ``thinking`` are mixed in before the first message: changing them invalidates the
messages part only, as the docs say; changing a tool invalidates everything.

Entries exist only at breakpoints (``cache_control``, at most 4, longer TTLs first, or the top-level
automatic one on the last block) whose prefix reaches the profile's minimum. A lookup tries each breakpoint
and up to 19 block boundaries before it (20 positions) and takes the longest live entry.
:meth:`PromptCache.plan` is pure; :meth:`PromptCache.commit` applies a plan once the response that made it
has started, which is when the API makes an entry visible to other requests and refreshes the TTL of the one
it read; lifetimes count from the start of the request.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from speculate.errors import SpeculateError
from speculate.sim.tokens import block_tokens, canonical_json

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTL_S = {"5m": 300.0, "1h": 3600.0}


class CacheControlError(SpeculateError, ValueError):
    """A request's cache_control markers break the API's rules; the message names the field."""


@dataclass(frozen=True)
class Unit:
    key: bytes  # cumulative digest up to and including this block
    tokens: int
    ttl: str | None  # "5m" / "1h" when this block carries a breakpoint
    path: str  # field path, for error messages


@dataclass(frozen=True)
class CachePlan:
    read_tokens: int
    write_tokens_5m: int
    write_tokens_1h: int
    input_tokens: int  # tokens after the last written (or read) position
    read_key: bytes | None
    writes: tuple[tuple[bytes, int, str], ...]  # (key, prefix tokens, ttl)

    @property
    def creation_tokens(self) -> int:
        return self.write_tokens_5m + self.write_tokens_1h

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.creation_tokens + self.read_tokens

    def usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.creation_tokens,
            "cache_read_input_tokens": self.read_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.write_tokens_5m,
                "ephemeral_1h_input_tokens": self.write_tokens_1h,
            },
        }


def _ttl_of(marker: Any, path: str) -> str:
    if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
        raise CacheControlError(f"{path}.type: Input should be 'ephemeral'")
    ttl = marker.get("ttl", "5m")
    if ttl not in TTL_S:
        raise CacheControlError(f"{path}.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _strip(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def units_of(body: dict[str, Any]) -> list[Unit]:
    """Cut a (validated) request body into cache units, tools -> system -> messages."""
    raw: list[tuple[bytes, int, str | None, str]] = []

    def add(tag: str, block: Any, path: str) -> None:
        marker = block.get("cache_control") if isinstance(block, dict) else None
        ttl = _ttl_of(marker, f"{path}.cache_control") if marker is not None else None
        raw.append((f"{tag}\x00{canonical_json(_strip(block))}".encode(), block_tokens(block), ttl, path))

    for i, tool in enumerate(body.get("tools") or []):
        add("tool", tool, f"tools.{i}")
    system = body.get("system")
    if isinstance(system, str) and system:
        add("system", {"type": "text", "text": system}, "system")
    elif isinstance(system, list):
        for i, block in enumerate(system):
            add("system", block, f"system.{i}")
    # Parameters that invalidate the messages part: folded into the first message unit's key.
    context = canonical_json({"tool_choice": body.get("tool_choice"), "thinking": body.get("thinking")})
    for m, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for b, block in enumerate(blocks):
            tag = f"msg\x00{context if m == 0 and b == 0 else ''}\x00{message.get('role')}\x00{int(b == 0)}"
            add(tag, block, f"messages.{m}.content.{b}")

    auto = body.get("cache_control")
    if auto is not None and raw:
        ttl = _ttl_of(auto, "cache_control")
        last = raw[-1]
        raw[-1] = (last[0], last[1], last[2] or ttl, last[3])

    count = sum(1 for r in raw if r[2] is not None)
    if count > MAX_BREAKPOINTS:
        raise CacheControlError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {count}."
        )
    seen_5m = False
    for _, _, ttl, path in raw:
        if ttl == "1h" and seen_5m:
            raise CacheControlError(
                f"{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`."
            )
        seen_5m = seen_5m or ttl == "5m"

    units: list[Unit] = []
    digest = hashlib.sha256(f"model\x00{body.get('model')}".encode()).digest()
    for data, tokens, ttl, path in raw:
        digest = hashlib.sha256(digest + data).digest()
        units.append(Unit(key=digest, tokens=tokens, ttl=ttl, path=path))
    return units


@dataclass
class _Entry:
    tokens: int
    ttl: str
    expires: float


@dataclass
class CacheStatistics:
    entries: int = 0
    hits: int = 0
    misses: int = 0  # requests with a breakpoint that read nothing
    written_tokens: int = 0
    read_tokens: int = 0


@dataclass
class PromptCache:
    """Live cache entries keyed by cumulative prefix digest; thread-safe."""

    _entries: dict[bytes, _Entry] = field(default_factory=dict)
    _stats: CacheStatistics = field(default_factory=CacheStatistics)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def plan(self, units: list[Unit], *, now: float, min_tokens: int) -> CachePlan:
        """What this request would read and write at time ``now``; changes nothing."""
        cumulative: list[int] = []
        running = 0
        for unit in units:
            running += unit.tokens
            cumulative.append(running)
        total = running
        breakpoints = [i for i, u in enumerate(units) if u.ttl is not None]

        read_at = -1
        with self._lock:
            for bp in breakpoints:
                for j in range(bp, max(-1, bp - LOOKBACK_BLOCKS), -1):
                    entry = self._entries.get(units[j].key)
                    if entry is not None and entry.expires > now:
                        read_at = max(read_at, j)
                        break
        read_tokens = cumulative[read_at] if read_at >= 0 else 0

        writes: list[tuple[bytes, int, str]] = []
        split = {"5m": 0, "1h": 0}
        done = read_tokens
        for bp in breakpoints:
            if bp <= read_at or cumulative[bp] < min_tokens:
                continue
            ttl = units[bp].ttl or "5m"
            writes.append((units[bp].key, cumulative[bp], ttl))
            split[ttl] += cumulative[bp] - done
            done = cumulative[bp]
        return CachePlan(
            read_tokens=read_tokens,
            write_tokens_5m=split["5m"],
            write_tokens_1h=split["1h"],
            input_tokens=total - done,
            read_key=units[read_at].key if read_at >= 0 else None,
            writes=tuple(writes),
        )

    def commit(
        self, plan: CachePlan, *, now: float, had_breakpoint: bool = True, requested: float | None = None
    ) -> None:
        """The response behind ``plan`` has started: its writes become visible, its read is refreshed.

        Lifetimes count from ``requested``, the start of the request (default ``now``), as the docs say.
        """
        start = now if requested is None else requested
        with self._lock:
            if plan.read_key is not None and plan.read_key in self._entries:
                entry = self._entries[plan.read_key]
                entry.expires = max(entry.expires, start + TTL_S[entry.ttl])
                self._stats.hits += 1
                self._stats.read_tokens += plan.read_tokens
            elif had_breakpoint:
                self._stats.misses += 1
            for key, tokens, ttl in plan.writes:
                self._entries[key] = _Entry(tokens=tokens, ttl=ttl, expires=start + TTL_S[ttl])
            self._stats.written_tokens += plan.creation_tokens
            self._entries = {k: e for k, e in self._entries.items() if e.expires > now}

    def statistics(self) -> CacheStatistics:
        with self._lock:
            return CacheStatistics(
                entries=len(self._entries),
                hits=self._stats.hits,
                misses=self._stats.misses,
                written_tokens=self._stats.written_tokens,
                read_tokens=self._stats.read_tokens,
            )
