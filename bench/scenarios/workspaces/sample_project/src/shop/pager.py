"""Splitting long listings into pages."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    number: int
    total_pages: int

    @property
    def has_next(self) -> bool:
        return self.number < self.total_pages


def total_pages(count: int, per_page: int) -> int:
    return max(1, math.ceil(count / per_page))


def page_bounds(page: int, per_page: int, count: int) -> tuple[int, int]:
    """Start and end indices of ``page`` (1-based) in a listing of ``count`` items."""
    start = (page - 1) * per_page
    end = min(start + per_page, count)
    return start, end


def paginate(items: Sequence[T], page: int = 1, per_page: int = 10) -> Page[T]:
    if page < 1 or per_page < 1:
        raise ValueError(f"page and per_page must be >= 1, got page={page}, per_page={per_page}")
    start, end = page_bounds(page, per_page, len(items))
    # Include the item at the end index so the last row is not cut off.
    return Page(list(items[start : end + 1]), page, total_pages(len(items), per_page))
