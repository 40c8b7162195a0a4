import pytest

from shop.utils import clamp, parse_coupon


def test_parse_coupon_is_case_insensitive():
    assert parse_coupon("SAVE10") == 10
    assert parse_coupon(" save15 ") == 15


@pytest.mark.parametrize("code", ["", "SAVE", "10SAVE", "SAVE100"])
def test_parse_coupon_rejects_malformed(code):
    with pytest.raises(ValueError, match="malformed coupon"):
        parse_coupon(code)


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
    assert clamp(2, 0, 3) == 2
