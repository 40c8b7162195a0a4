import pytest

from shop.inventory import Inventory, OutOfStock


def test_reserve_reduces_available(catalog):
    inv = Inventory(catalog.values())
    inv.reserve("MUG-002", 2)
    assert inv.available("MUG-002") == 1


def test_reserve_more_than_available_raises(catalog):
    inv = Inventory(catalog.values())
    with pytest.raises(OutOfStock):
        inv.reserve("MUG-002", 4)


def test_release_returns_units(catalog):
    inv = Inventory(catalog.values())
    inv.reserve("POT-001", 3)
    inv.release("POT-001", 2)
    assert inv.available("POT-001") == 3


def test_low_stock(catalog):
    inv = Inventory(catalog.values())
    assert inv.low_stock(threshold=6) == ["TEA-003", "MUG-002", "POT-001", "ACC-003"]
