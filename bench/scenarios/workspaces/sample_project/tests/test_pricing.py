import pytest

from shop.pricing import add_tax, apply_discount, format_price


@pytest.mark.parametrize(
    ("cents", "text"),
    [(0, "$0.00"), (5, "$0.05"), (1999, "$19.99"), (123456, "$1,234.56"), (-250, "-$2.50")],
)
def test_format_price(cents, text):
    assert format_price(cents) == text


def test_apply_discount_rounds_half_up():
    assert apply_discount(999, 15) == 849  # 849.15
    assert apply_discount(50, 25) == 38  # 37.5


def test_apply_discount_clamps_percent():
    assert apply_discount(1000, 150) == 0
    assert apply_discount(1000, -5) == 1000


def test_add_tax():
    assert add_tax(1000) == 1080
    assert add_tax(1000, rate_percent=0) == 1000
