"""The shopping cart: line items, subtotal, coupon and total."""

from __future__ import annotations

from dataclasses import dataclass, field

from shop.catalog import Product
from shop.pricing import add_tax, apply_discount, format_price
from shop.utils import parse_coupon


@dataclass
class LineItem:
    product: Product
    quantity: int

    @property
    def amount_cents(self) -> int:
        return self.product.price_cents * self.quantity


@dataclass
class Cart:
    items: dict[str, LineItem] = field(default_factory=dict)
    discount_percent: int = 0

    def add(self, product: Product, quantity: int = 1) -> None:
        if quantity <= 0:
            raise ValueError(f"quantity must be positive, got {quantity}")
        line = self.items.get(product.sku)
        if line is None:
            self.items[product.sku] = LineItem(product, quantity)
        else:
            line.quantity += quantity

    def remove(self, sku: str) -> None:
        self.items.pop(sku, None)

    def apply_coupon(self, code: str) -> None:
        self.discount_percent = parse_coupon(code)

    def subtotal_cents(self) -> int:
        return sum(line.amount_cents for line in self.items.values())

    def total_cents(self) -> int:
        """Subtotal, less the coupon discount, plus tax."""
        return add_tax(apply_discount(self.subtotal_cents(), self.discount_percent))

    def receipt(self) -> str:
        lines = [
            f"{line.quantity} x {line.product.name:<30} {format_price(line.amount_cents):>10}"
            for line in self.items.values()
        ]
        if self.discount_percent:
            lines.append(f"coupon: {self.discount_percent}% off")
        lines.append(f"{'total':<34} {format_price(self.total_cents()):>10}")
        return "\n".join(lines)
