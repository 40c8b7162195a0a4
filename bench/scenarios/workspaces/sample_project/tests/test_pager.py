import pytest

from shop.pager import paginate, total_pages


def test_total_pages():
    assert total_pages(0, 10) == 1
    assert total_pages(10, 10) == 1
    assert total_pages(11, 10) == 2


def test_last_page_is_partial():
    page = paginate(list(range(12)), page=3, per_page=5)
    assert page.items == [10, 11]
    assert not page.has_next


def test_rejects_page_zero():
    with pytest.raises(ValueError):
        paginate([1, 2, 3], page=0)
