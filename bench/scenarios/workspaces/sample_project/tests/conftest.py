from pathlib import Path

import pytest

from shop.catalog import load_catalog

DATA = Path(__file__).resolve().parents[1] / "data" / "catalog.json"


@pytest.fixture
def catalog():
    return load_catalog(DATA)
