import pytest

from shop.cart import Cart


def test_add_merges_lines(catalog):
    cart = Cart()
    cart.add(catalog["TEA-001"], 2)
    cart.add(catalog["TEA-001"])
    assert cart.items["TEA-001"].quantity == 3
    assert cart.subtotal_cents() == 3 * 899


def test_add_rejects_non_positive_quantity(catalog):
    with pytest.raises(ValueError):
        Cart().add(catalog["TEA-001"], 0)


def test_total_applies_coupon_then_tax(catalog):
    cart = Cart()
    cart.add(catalog["MUG-001"], 2)  # 2800
    cart.apply_coupon("save10")  # 2520
    assert cart.total_cents() == 2722  # 2520 * 1.08 = 2721.6


def test_receipt_lists_lines_and_total(catalog):
    cart = Cart()
    cart.add(catalog["TEA-002"])
    receipt = cart.receipt()
    assert "Assam breakfast tea" in receipt
    assert receipt.splitlines()[-1].endswith("$13.50")
