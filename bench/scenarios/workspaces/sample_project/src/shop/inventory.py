"""Stock levels and reservations."""

from __future__ import annotations

from collections.abc import Iterable

from shop.catalog import Product


class OutOfStock(Exception):
    pass


class Inventory:
    def __init__(self, products: Iterable[Product]) -> None:
        self._stock: dict[str, int] = {p.sku: p.stock for p in products}
        self._reserved: dict[str, int] = {}

    def available(self, sku: str) -> int:
        """Units on hand that are not reserved."""
        return self._stock.get(sku, 0) - self._reserved.get(sku, 0)

    def reserve(self, sku: str, quantity: int) -> None:
        if quantity > self.available(sku):
            raise OutOfStock(sku)
        self._reserved[sku] = self._reserved.get(sku, 0) + quantity

    def release(self, sku: str, quantity: int) -> None:
        held = self._reserved.get(sku, 0)
        self._reserved[sku] = max(0, held - quantity)

    def low_stock(self, threshold: int = 5) -> list[str]:
        """SKUs whose available units are at or below ``threshold``, in catalog order."""
        return [sku for sku in self._stock if self.available(sku) < threshold]
