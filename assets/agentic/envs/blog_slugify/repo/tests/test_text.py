from blog.text import slugify, word_count


def test_slugify_simple():
    assert slugify("hello") == "hello"


def test_word_count():
    assert word_count("a b  c") == 3
