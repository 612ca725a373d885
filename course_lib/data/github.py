"""A small GitHub REST client for the ``full`` profile: repository search, pagination, rate limits,
tarball download. Only the standard library (urllib) is used.

- Token: ``GITHUB_TOKEN`` (a classic or fine-grained token; no scopes are needed for public
  repositories). Without it the search API allows about 10 requests a minute and a clear message says so.
- Pagination: follows the ``Link: <...>; rel="next"`` header.
- Rate limits: on 403/429 the client reads ``Retry-After`` or ``X-RateLimit-Remaining: 0`` +
  ``X-RateLimit-Reset`` (epoch seconds), waits, and retries; waits longer than ``max_wait_s`` raise
  :class:`RateLimitError` instead of hanging.
- ``GITHUB_API_URL`` points the client elsewhere (the tests use a GitHub-shaped server on 127.0.0.1).

Introduced in lesson 01.
"""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from course_lib import store
from course_lib.data.filters import normalize_license
from course_lib.data.repos import Repo, code_files

DEFAULT_API_URL = "https://api.github.com"
# one search per licence: the search API has no OR between licence qualifiers
DEFAULT_SEARCH_LICENSES = ("mit", "apache-2.0", "bsd-3-clause", "bsd-2-clause", "isc")
TOKEN_HELP = (
    "GITHUB_TOKEN is not set. The GitHub search API allows about 10 requests a minute without a token "
    "(30 with one) and the core API 60 an hour (5,000 with one). Create a token at "
    "https://github.com/settings/tokens (no scopes are needed for public repositories) and run "
    "`export GITHUB_TOKEN=...` before starting Jupyter.")


class GitHubError(RuntimeError):
    """A GitHub API call failed (the message says which URL and what to do)."""


class TokenMissingError(GitHubError):
    """``GITHUB_TOKEN`` is required but not set."""


class RateLimitError(GitHubError):
    """The rate limit is exhausted and the reset is further away than the client may wait."""


def parse_link_header(value: str | None) -> dict[str, str]:
    """``'<https://...page=2>; rel="next", <...>; rel="last"'`` → ``{"next": url, "last": url}``.

    Introduced in lesson 01.
    """
    links = {}
    for part in (value or "").split(","):
        m = re.search(r"<([^>]+)>\s*;\s*rel=\"?([a-z]+)\"?", part.strip())
        if m:
            links[m.group(2)] = m.group(1)
    return links


def build_search_query(language: str | None = "python", *, min_stars: int | None = 10,
                       pushed_after: dt.date | None = None, license: str | None = None,
                       extra: str = "") -> str:
    """A repository search query: ``language:python stars:>10 pushed:>=2024-12-01 license:mit``.

    ``min_stars`` is exclusive (``stars:>N``), like the course's selection rule. Introduced in lesson 01.
    """
    parts = []
    if language:
        parts.append(f"language:{language}")
    if min_stars is not None:
        parts.append(f"stars:>{int(min_stars)}")
    if pushed_after is not None:
        parts.append(f"pushed:>={pushed_after.isoformat()}")
    if license:
        parts.append(f"license:{license}")
    if extra:
        parts.append(extra.strip())
    return " ".join(parts)


@dataclass
class GitHubClient:
    """GitHub REST client with pagination and rate-limit handling. Introduced in lesson 01."""

    token: str | None = None
    base_url: str = DEFAULT_API_URL
    max_retries: int = 4
    max_wait_s: float = 900.0
    timeout_s: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    waits: list[float] = field(default_factory=list)   # seconds waited for rate limits (for reports)

    @classmethod
    def from_env(cls, *, require_token: bool = False, **kwargs) -> "GitHubClient":
        """A client with ``GITHUB_TOKEN`` and ``GITHUB_API_URL`` from the environment. Prints
        :data:`TOKEN_HELP` when the token is missing, or raises :class:`TokenMissingError` when
        ``require_token``."""
        token = os.environ.get("GITHUB_TOKEN") or None
        if token is None:
            if require_token:
                raise TokenMissingError(TOKEN_HELP)
            print(f"warning: {TOKEN_HELP}")
        base = kwargs.pop("base_url", None) or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
        return cls(token=token, base_url=base.rstrip("/"), **kwargs)

    def _url(self, path_or_url: str, params: dict | None = None) -> str:
        url = path_or_url if "://" in path_or_url else f"{self.base_url}/{path_or_url.lstrip('/')}"
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        return url

    def _headers(self, accept: str) -> dict[str, str]:
        h = {"Accept": accept, "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "code-llm-course"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def _rate_limit_wait(self, status: int, headers) -> float | None:
        """Seconds to wait before retrying, or None when the error is not a rate limit."""
        retry_after = headers.get("Retry-After")
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                return 60.0
        if headers.get("X-RateLimit-Remaining") == "0":
            reset = headers.get("X-RateLimit-Reset")
            try:
                return max(0.0, float(reset) - self.clock()) + 1.0
            except (TypeError, ValueError):
                return 60.0
        if status == 429:
            return 60.0  # secondary rate limit without headers: GitHub asks for at least a minute
        return None

    def request_raw(self, path_or_url: str, params: dict | None = None, *,
                    accept: str = "application/vnd.github+json") -> tuple[bytes, dict[str, str]]:
        """GET with retries; returns ``(body, headers)``. Raises :class:`GitHubError` with the URL."""
        url = self._url(path_or_url, params)
        for attempt in range(self.max_retries + 1):
            req = urllib.request.Request(url, headers=self._headers(accept))
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return resp.read(), dict(resp.headers.items())
            except urllib.error.HTTPError as exc:
                body = exc.read()[:500].decode("utf-8", "replace")
                if exc.code in (403, 429):
                    wait = self._rate_limit_wait(exc.code, exc.headers)
                    if wait is None:
                        raise GitHubError(f"GET {url}: 403 forbidden ({body.strip()[:200]}); "
                                          f"check the token's permissions") from None
                    if wait > self.max_wait_s:
                        raise RateLimitError(
                            f"GET {url}: rate limit exhausted; it resets in {wait:.0f} s, more than "
                            f"max_wait_s={self.max_wait_s:.0f}. Set GITHUB_TOKEN for a higher limit "
                            f"or try again later.") from None
                    if attempt == self.max_retries:
                        break
                    self.waits.append(wait)
                    self.sleep(wait)
                    continue
                if exc.code == 401:
                    raise GitHubError(f"GET {url}: 401 bad credentials; check GITHUB_TOKEN") from None
                if exc.code >= 500 and attempt < self.max_retries:
                    self.sleep(min(2 ** attempt, 30))
                    continue
                raise GitHubError(f"GET {url}: HTTP {exc.code}: {body.strip()[:200]}") from None
            except urllib.error.URLError as exc:
                if attempt < self.max_retries:
                    self.sleep(min(2 ** attempt, 30))
                    continue
                raise GitHubError(f"GET {url}: cannot connect ({exc.reason}); is the network up?") from None
        raise RateLimitError(f"GET {url}: still rate limited after {self.max_retries} retries")

    def request_json(self, path_or_url: str, params: dict | None = None) -> tuple[object, dict[str, str]]:
        body, headers = self.request_raw(path_or_url, params)
        try:
            return json.loads(body), headers
        except json.JSONDecodeError:
            raise GitHubError(f"GET {path_or_url}: the answer is not JSON: {body[:100]!r}") from None

    def paginate(self, path: str, params: dict | None = None, *, max_items: int | None = None,
                 items_key: str | None = "items") -> Iterator[dict]:
        """Yield items across pages, following ``Link: rel="next"``. Introduced in lesson 01."""
        url: str | None = self._url(path, params)
        count = 0
        while url:
            data, headers = self.request_json(url)
            items = data.get(items_key, []) if items_key and isinstance(data, dict) else data
            for item in items:
                yield item
                count += 1
                if max_items is not None and count >= max_items:
                    return
            url = parse_link_header(headers.get("Link") or headers.get("link")).get("next")


def repo_from_search_item(item: dict) -> Repo:
    """A :class:`~course_lib.data.repos.Repo` from one search result (no files yet)."""
    lic = item.get("license") or {}
    raw = lic.get("spdx_id") or lic.get("name")
    if raw in ("NOASSERTION", "Other"):
        raw = lic.get("name") or raw
    pushed = item.get("pushed_at")
    return Repo(name=item["full_name"], version=item.get("default_branch") or "HEAD",
                license_raw=raw, license=normalize_license(raw), license_source="GitHub API",
                root="", files=(), stars=item.get("stargazers_count"),
                pushed_at=dt.date.fromisoformat(pushed[:10]) if pushed else None, source="github")


def search_repos(client: GitHubClient, query: str = "language:python", *, min_stars: int = 10,
                 pushed_within_months: float = 24, max_repos: int = 100,
                 licenses: tuple[str, ...] | None = DEFAULT_SEARCH_LICENSES,
                 today: dt.date | None = None) -> list[Repo]:
    """Search repositories (most stars first), one query per licence, deduplicated by full name.

    Introduced in lesson 01.
    """
    today = today or dt.date.today()
    pushed_after = today - dt.timedelta(days=int(pushed_within_months * 30.44))
    found: dict[str, Repo] = {}
    for lic in (licenses or (None,)):
        q = f"{query} " + build_search_query(None, min_stars=min_stars, pushed_after=pushed_after, license=lic)
        params = {"q": q.strip(), "sort": "stars", "order": "desc", "per_page": 100}
        for item in client.paginate("/search/repositories", params, max_items=max_repos):
            repo = repo_from_search_item(item)
            found.setdefault(repo.name, repo)
    return sorted(found.values(), key=lambda r: (-(r.stars or 0), r.name))[:max_repos]


def extract_tarball(data: bytes, dest: Path) -> Path:
    """Extract a GitHub tarball safely (no absolute paths, no ``..``; links kept only inside) and
    return the repository folder (the tarball's single top folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        tar.extractall(dest, filter="data")
    tops = [p for p in dest.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else dest


def download_repos(client: GitHubClient, repos: list[Repo], dest: Path) -> list[Repo]:
    """Download each repository's tarball (``GET /repos/{owner}/{repo}/tarball/{ref}``) into ``dest``
    (an artefact of :mod:`course_lib.store` per repository and version, reused when complete) and return
    the repos with ``root`` and code ``files`` filled in.
    A repository that fails to download is reported and skipped. Introduced in lesson 01."""
    out = []
    for repo in repos:
        def fetch(folder: Path, repo: Repo = repo) -> dict:
            data, _ = client.request_raw(f"/repos/{repo.name}/tarball/{repo.version}",
                                         accept="application/vnd.github+json")
            extract_tarball(data, folder / "src")
            return {"bytes": len(data)}

        try:
            art = store.get_or_build("github", repo.name.replace("/", "__"),
                                     {"repo": repo.name, "version": repo.version}, fetch, root=Path(dest))
            folder = art.path / "src"
            tops = [p for p in folder.iterdir() if p.is_dir()]
            root = tops[0] if len(tops) == 1 else folder
        except (GitHubError, tarfile.TarError, OSError) as exc:
            print(f"skipping {repo.name}: {exc}")
            continue
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            files += [fn if rel == "." else f"{rel}/{fn}".replace(os.sep, "/") for fn in filenames]
        out.append(replace(repo, root=str(root), files=code_files(files)))
    return out
