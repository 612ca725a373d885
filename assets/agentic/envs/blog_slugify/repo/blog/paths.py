"""Where posts live."""


def post_path(slug: str) -> str:
    return f"posts/{slug}.html"
