"""Money arithmetic. All amounts are integer cents; rounding is half-up."""

from __future__ import annotations

from shop.utils import clamp

TAX_RATE_PERCENT = 8


def _round_half_up(numerator: int, denominator: int) -> int:
    return (numerator * 2 + denominator) // (denominator * 2)


def apply_discount(price_cents: int, percent: int) -> int:
    """Price after a percentage discount; the percentage is clamped to 0..100."""
    percent = clamp(percent, 0, 100)
    return _round_half_up(price_cents * (100 - percent), 100)


def add_tax(amount_cents: int, rate_percent: int = TAX_RATE_PERCENT) -> int:
    return amount_cents + _round_half_up(amount_cents * rate_percent, 100)


def format_price(cents: int) -> str:
    """Format cents as dollars, e.g. 1999 -> "$19.99", -250 -> "-$2.50"."""
    sign = "-" if cents < 0 else ""
    dollars, rest = divmod(abs(cents), 100)
    return f"{sign}${dollars:,}.{rest:02d}"
