from shop.cli import main


def test_list_prints_page_footer(capsys):
    assert main(["list", "--per-page", "5"]) == 0
    out = capsys.readouterr().out
    assert "TEA-001" in out
    assert out.rstrip().endswith("page 1 of 3")


def test_show_unknown_sku(capsys):
    assert main(["show", "NOPE-1"]) == 1
    assert "unknown SKU" in capsys.readouterr().err


def test_quote_with_coupon(capsys):
    assert main(["quote", "TEA-001:2", "--coupon", "SAVE10"]) == 0
    out = capsys.readouterr().out
    assert "coupon: 10% off" in out
    assert "$17.47" in out  # 1798 -> 1618 (10% off) -> 1747 (8% tax)
