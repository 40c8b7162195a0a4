"""The ``shop`` command: list products, show one, quote a cart."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shop.cart import Cart
from shop.catalog import DEFAULT_CATALOG, load_catalog
from shop.pager import paginate
from shop.pricing import format_price


def _parse_line(arg: str) -> tuple[str, int]:
    sku, _, qty = arg.partition(":")
    return sku, int(qty or 1)


def cmd_list(args: argparse.Namespace) -> int:
    products = list(load_catalog(args.catalog).values())
    page = paginate(products, args.page, args.per_page)
    for p in page.items:
        print(f"{p.sku:<8} {p.name:<30} {format_price(p.price_cents):>9}")
    print(f"page {page.number} of {page.total_pages}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    product = catalog.get(args.sku)
    if product is None:
        print(f"unknown SKU: {args.sku}", file=sys.stderr)
        return 1
    print(f"{product.sku}  {product.name}")
    print(f"price: {format_price(product.price_cents)}   in stock: {product.stock}")
    return 0


def cmd_quote(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.catalog)
    cart = Cart()
    for arg in args.lines:
        sku, qty = _parse_line(arg)
        cart.add(catalog[sku], qty)
    if args.coupon:
        cart.apply_coupon(args.coupon)
    print(cart.receipt())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shop")
    parser.add_argument("--catalog", default=str(DEFAULT_CATALOG))
    sub = parser.add_subparsers(dest="command", required=True)

    p_list = sub.add_parser("list", help="list products")
    p_list.add_argument("--page", type=int, default=1)
    p_list.add_argument("--per-page", type=int, default=10)
    p_list.set_defaults(func=cmd_list)

    p_show = sub.add_parser("show", help="show one product")
    p_show.add_argument("sku")
    p_show.set_defaults(func=cmd_show)

    p_quote = sub.add_parser("quote", help="price a cart, e.g. quote TEA-001:2 MUG-001")
    p_quote.add_argument("lines", nargs="+")
    p_quote.add_argument("--coupon")
    p_quote.set_defaults(func=cmd_quote)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
