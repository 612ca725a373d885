"""Repository selection (ci table) and the GitHub client against a GitHub-shaped server on 127.0.0.1."""
from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

from course_lib.data import github
from course_lib.data.repos import (
    Repo,
    canonical_name,
    installed_repos,
    load_repo_metadata,
    local_repos,
    metadata_as_of,
    repo_rejection_reason,
    select_repos,
    source_files,
    stdlib_repo,
    write_illustrative_metadata,
)

AS_OF = dt.date(2026, 12, 1)


def _repo(name="r", license="MIT", stars=100, pushed=dt.date(2026, 6, 1), files=("a.py",)):
    return Repo(name, "1.0", license, license, "test", "/nonexistent", tuple(files), stars, pushed)


# --- selection ------------------------------------------------------------------------------------
def test_rejection_reasons_are_named():
    kw = dict(min_stars=5, active_within_months=36, as_of=AS_OF)
    assert repo_rejection_reason(_repo(), **kw) is None
    assert repo_rejection_reason(_repo(license="GPL-3.0"), **kw).startswith("licence: copyleft")
    assert repo_rejection_reason(_repo(license=None), **kw) == "licence: no licence metadata"
    assert repo_rejection_reason(_repo(license="Proprietary"), **kw).startswith("licence: unknown")
    assert repo_rejection_reason(_repo(stars=5), **kw) == "stars: 5 <= 5"   # stars must be > 5
    assert repo_rejection_reason(_repo(stars=6), **kw) is None
    assert repo_rejection_reason(_repo(stars=None), **kw).startswith("no metadata")
    assert repo_rejection_reason(_repo(pushed=dt.date(2020, 1, 1)), **kw).startswith("inactive")


def test_select_repos_caps_by_stars_and_reports_everything():
    repos = [_repo(f"r{i}", stars=10 * i) for i in range(1, 6)] + [_repo("gpl", license="GPL-2.0")]
    sel = select_repos(repos, min_stars=5, active_within_months=36, as_of=AS_OF, max_repos=3)
    assert [r.name for r in sel.kept] == ["r3", "r4", "r5"]
    assert len(sel.kept) + len(sel.rejected) == len(repos)
    assert sel.reasons() == {"over max_repos": 2, "licence": 1}


def test_local_table_is_real_and_has_licences():
    repos = installed_repos()
    names = {r.name for r in repos}
    assert {"numpy", "datasets", "pytest"} <= names
    assert all(r.name == canonical_name(r.name) for r in repos)
    numpy = next(r for r in repos if r.name == "numpy")
    assert numpy.license == "BSD-3-Clause" and numpy.files and numpy.files[0].count("/") <= 1
    std = stdlib_repo()
    assert std.license == "PSF-2.0" and any(f == "os.py" for f in std.files)
    table = local_repos()
    assert sum(r.stars is not None for r in table) > 0.9 * len(table)


def test_source_files_is_the_one_walker(tmp_path):
    for rel in ["a.py", "pkg/__init__.py", "pkg/b.py", "pkg/__pycache__/b.cpython-311.pyc",
                "site-packages/x/y.py", "config-3.11-x86_64-linux-gnu/Makefile", "z/c.txt"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    assert source_files(tmp_path) == ["a.py", "pkg/__init__.py", "pkg/b.py", "z/c.txt"]
    assert source_files(tmp_path, skip_dirs={"z"}) == [
        "a.py", "pkg/__init__.py", "pkg/__pycache__/b.cpython-311.pyc", "pkg/b.py", "site-packages/x/y.py"]
    with pytest.raises(FileNotFoundError, match="not a folder"):
        source_files(tmp_path / "missing")


def test_metadata_table_is_labelled_illustrative(tmp_path):
    rows = load_repo_metadata()
    assert rows and all(r["note"] == "illustrative" for r in rows.values())
    assert metadata_as_of() == AS_OF
    out = write_illustrative_metadata(tmp_path / "m.csv", ["b", "a"], AS_OF)
    text = out.read_text()
    assert "ILLUSTRATIVE" in text and text.index("\na,") < text.index("\nb,")
    assert load_repo_metadata(out) == load_repo_metadata(out)  # deterministic
    bad = tmp_path / "bad.csv"
    bad.write_text("repo,stars,pushed_at,note\nx,many,2020-01-01,illustrative\n")
    with pytest.raises(ValueError, match="row 2"):
        load_repo_metadata(bad)


# --- GitHub client against a local GitHub-shaped server ------------------------------------------
sys.path.insert(0, str(Path(__file__).parent))
from _github_shaped import _GitHubShaped, _item  # noqa: E402
from _github_shaped import github_server as server  # noqa: E402,F401  (fixture)


def _client(base, **kw):
    waits = []
    c = github.GitHubClient(token="test-token-not-real", base_url=base, sleep=waits.append, **kw)
    return c, waits


def test_parse_link_header_and_query_builder():
    links = github.parse_link_header('<https://x/s?page=2>; rel="next", <https://x/s?page=9>; rel="last"')
    assert links == {"next": "https://x/s?page=2", "last": "https://x/s?page=9"}
    assert github.parse_link_header(None) == {}
    q = github.build_search_query("python", min_stars=10, pushed_after=dt.date(2025, 1, 2), license="mit")
    assert q == "language:python stars:>10 pushed:>=2025-01-02 license:mit"


def test_pagination_follows_link_headers_and_sends_token(server):
    client, waits = _client(server)
    items = list(client.paginate("/search/repositories", {"q": "language:python", "per_page": 2}))
    assert [i["full_name"] for i in items] == [f"octo/repo{i}" for i in range(6)]
    assert [qs.get("page", "1") for _, qs, _ in _GitHubShaped.calls] == ["1", "2", "3"]
    assert all(auth == "Bearer test-token-not-real" for *_, auth in _GitHubShaped.calls)
    assert len(list(client.paginate("/search/repositories", {"q": "x"}, max_items=3))) == 3


def test_primary_and_secondary_rate_limits_wait_then_retry(server):
    client, waits = _client(server)
    assert len(list(client.paginate("/search/repositories", {"q": "limit-primary"}))) == 6
    assert len(waits) == 1 and 0 < waits[0] <= 4          # until X-RateLimit-Reset (+1 s)
    assert len(list(client.paginate("/search/repositories", {"q": "limit-secondary"}))) == 6
    assert waits[1] == 3.0                                 # Retry-After
    with pytest.raises(github.RateLimitError, match="GITHUB_TOKEN"):
        list(client.paginate("/search/repositories", {"q": "limit-forever"}))
    with pytest.raises(github.GitHubError, match="403 forbidden"):
        list(client.paginate("/search/repositories", {"q": "forbidden"}))
    with pytest.raises(github.GitHubError, match="HTTP 404"):
        client.request_json("/nope")


def test_search_repos_one_query_per_licence(server):
    client, _ = _client(server)
    repos = github.search_repos(client, "language:python", min_stars=10, pushed_within_months=24,
                                max_repos=10, licenses=("mit", "apache-2.0"), today=AS_OF)
    assert len(repos) == 10 and repos[0].stars >= repos[-1].stars
    assert {r.license for r in repos} == {"MIT", "Apache-2.0"}
    q = _GitHubShaped.calls[0][1]["q"]
    assert "stars:>10" in q and "pushed:>=2024-12-" in q and "license:mit" in q
    sel = select_repos(repos, min_stars=10, active_within_months=24, as_of=AS_OF)
    assert len(sel.kept) == 10  # files are not needed to select (they come with the download)


def test_download_repos_extracts_code_files(server, tmp_path):
    client, _ = _client(server)
    repos = [github.repo_from_search_item(_item(1))]
    got = github.download_repos(client, repos, tmp_path)
    assert got[0].files == ("pkg/__init__.py", "pkg/core.py")
    assert [p.name for p in tmp_path.glob("octo__repo1-*") if p.is_symlink()]  # one store artefact
    again = github.download_repos(client, repos, tmp_path)  # cached: no new request
    assert again[0].files == got[0].files and len(_GitHubShaped.calls) == 1


def test_missing_token_message(monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with pytest.raises(github.TokenMissingError, match="export GITHUB_TOKEN"):
        github.GitHubClient.from_env(require_token=True)
    client = github.GitHubClient.from_env(base_url="http://127.0.0.1:9")
    assert client.token is None and "GITHUB_TOKEN is not set" in capsys.readouterr().out
    monkeypatch.setenv("GITHUB_TOKEN", "abc")
    assert github.GitHubClient.from_env().token == "abc"


def test_server_errors_are_retried_and_bad_credentials_explained(server):
    client, waits = _client(server)
    assert len(list(client.paginate("/search/repositories", {"q": "flaky"}))) == 6
    assert waits == [1]                                   # one backoff after the 502
    with pytest.raises(github.GitHubError, match="401 bad credentials; check GITHUB_TOKEN"):
        client.request_json("/search/repositories", {"q": "badtoken"})
    dead = github.GitHubClient(token=None, base_url="http://127.0.0.1:9", max_retries=1, sleep=lambda s: None)
    with pytest.raises(github.GitHubError, match="cannot connect"):
        dead.request_json("/search/repositories")
