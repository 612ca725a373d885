"""Money helpers for a tiny shop."""


def to_cents(amount: float) -> int:
    """Convert an amount in yuan to integer cents."""
    return round(amount * 100)


def format_price(cents: int) -> str:
    """Format cents as a price string: 1234 -> '12.34'."""
    return f"{cents // 100}.{cents % 100:02d}"


def round_price(amount: float) -> float:
    """Round a price to two decimals, halves going up (0.125 -> 0.13)."""
    return round(amount, 2)
