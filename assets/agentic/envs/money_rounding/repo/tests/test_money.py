from shop.money import format_price, round_price, to_cents


def test_to_cents():
    assert to_cents(12.34) == 1234


def test_format_price():
    assert format_price(1234) == "12.34"
    assert format_price(5) == "0.05"


def test_round_price_plain():
    assert round_price(1.234) == 1.23
