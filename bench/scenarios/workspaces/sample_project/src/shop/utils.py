"""Assorted helpers that predate the package layout."""

from __future__ import annotations

import re

_COUPON = re.compile(r"^([A-Z]+)(\d{1,2})$")


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def parse_coupon(code: str) -> int:
    """Percent off for a coupon code like "SAVE10" (any case); ValueError if malformed."""
    match = _COUPON.match(code.strip().upper())
    if match is None:
        raise ValueError(f"malformed coupon code: {code!r}")
    return int(match.group(2))
