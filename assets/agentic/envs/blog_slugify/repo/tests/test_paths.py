from blog.paths import post_path


def test_post_path():
    assert post_path("my-post") == "posts/my-post.html"
