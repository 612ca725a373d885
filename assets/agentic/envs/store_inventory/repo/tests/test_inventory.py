from store.inventory import Inventory


def test_add_and_count():
    inv = Inventory()
    inv.add("apple", 3)
    assert inv.count("apple") == 3


def test_remove():
    inv = Inventory()
    inv.add("pear", 2)
    inv.remove("pear")
    assert inv.count("pear") == 1
