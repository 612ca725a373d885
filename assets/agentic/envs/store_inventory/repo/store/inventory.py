"""A tiny inventory."""


class Inventory:
    def __init__(self):
        self.stock = {}

    def add(self, item: str, n: int = 1) -> None:
        self.stock[item] = self.stock.get(item, 0) + n

    def remove(self, item: str, n: int = 1) -> None:
        self.stock[item] = self.stock.get(item, 0) - n

    def count(self, item: str) -> int:
        return self.stock.get(item, 0)
