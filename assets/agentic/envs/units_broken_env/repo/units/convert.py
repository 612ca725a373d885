"""Unit conversion."""


def km_to_miles(km: float) -> float:
    return km * 0.62


def miles_to_km(miles: float) -> float:
    return miles / 0.621371
