from units.convert import miles_to_km


def test_miles_to_km():
    assert abs(miles_to_km(1) - 1.609344) < 1e-4
