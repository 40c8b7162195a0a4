"""shop: a tiny inventory and shopping-cart library."""

from shop.cart import Cart, LineItem
from shop.catalog import Product, load_catalog
from shop.inventory import Inventory, OutOfStock
from shop.pager import Page, paginate
from shop.pricing import apply_discount, format_price

__version__ = "0.3.1"

__all__ = [
    "Cart",
    "Inventory",
    "LineItem",
    "OutOfStock",
    "Page",
    "Product",
    "apply_discount",
    "format_price",
    "load_catalog",
    "paginate",
]
