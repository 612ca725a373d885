"""Text utilities."""
import re


def slugify(title: str) -> str:
    """'Hello, World!' -> 'hello-world'."""
    title = title.strip().lower()
    return re.sub(r"[^a-z0-9]", "-", title).strip("-")


def word_count(text: str) -> int:
    return len(text.split())
