"""Products and the catalog file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CATALOG = Path(__file__).resolve().parents[2] / "data" / "catalog.json"


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    price_cents: int
    stock: int = 0


def load_catalog(path: Path | str = DEFAULT_CATALOG) -> dict[str, Product]:
    """Read the catalog JSON (a list of objects) into a dict keyed by SKU, in file order."""
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    products: dict[str, Product] = {}
    for row in rows:
        product = Product(**row)
        if product.sku in products:
            raise ValueError(f"duplicate SKU in catalog: {product.sku}")
        products[product.sku] = product
    return products
