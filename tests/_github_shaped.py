"""A GitHub-shaped HTTP server on 127.0.0.1 for the tests (search with Link pagination, rate limits,
tarballs). Used by tests/test_repos.py and tests/test_corpus.py."""
from __future__ import annotations

import io
import json
import tarfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

MODULE_TEXT = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(8)) + "\n"

def _tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in {"octo-demo-abc123/pkg/__init__.py": "from .core import f\n",
                           "octo-demo-abc123/pkg/core.py": "# maintainer: wang.fang.dev@gmail.com\n" + MODULE_TEXT,
                           "octo-demo-abc123/README.md": "# demo\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _item(i: int, spdx: str = "MIT") -> dict:
    return {"full_name": f"octo/repo{i}", "stargazers_count": 1000 - i, "pushed_at": "2026-10-01T12:00:00Z",
            "default_branch": "main", "license": {"key": spdx.lower(), "spdx_id": spdx, "name": spdx}}


class _GitHubShaped(BaseHTTPRequestHandler):
    calls: list = []
    rate_limited_once: set = set()

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status, body, headers=None, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        qs = dict(urllib.parse.parse_qsl(url.query))
        type(self).calls.append((url.path, qs, self.headers.get("Authorization")))
        base = f"http://127.0.0.1:{self.server.server_port}"
        if url.path == "/search/repositories":
            page = int(qs.get("page", 1))
            q = qs["q"]
            if "limit-primary" in q and q not in self.rate_limited_once:
                self.rate_limited_once.add(q)
                return self._send(403, {"message": "API rate limit exceeded"},
                                  {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 2)})
            if "limit-secondary" in q and q not in self.rate_limited_once:
                self.rate_limited_once.add(q)
                return self._send(429, {"message": "secondary rate limit"}, {"Retry-After": "3"})
            if "limit-forever" in q:
                return self._send(403, {"message": "API rate limit exceeded"},
                                  {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)})
            if "forbidden" in q:
                return self._send(403, {"message": "Resource not accessible"})
            spdx = "Apache-2.0" if "license:apache-2.0" in q else "MIT"
            offset = 0 if spdx == "MIT" else 100
            items = [_item(offset + (page - 1) * 2 + k, spdx) for k in range(2)]
            headers = {}
            rest = {k: v for k, v in qs.items() if k != "page"}
            if page < 3:
                nxt = urllib.parse.urlencode({**rest, "page": page + 1})
                last = urllib.parse.urlencode({**rest, "page": 3})
                headers["Link"] = f'<{base}/search/repositories?{nxt}>; rel="next", <{base}/search/repositories?{last}>; rel="last"'
            return self._send(200, {"total_count": 6, "incomplete_results": False, "items": items}, headers)
        if url.path.startswith("/repos/") and "/tarball/" in url.path:
            return self._send(200, _tarball(), ctype="application/x-gzip")
        return self._send(404, {"message": "Not Found"})


@pytest.fixture()
def github_server():
    _GitHubShaped.calls = []
    _GitHubShaped.rate_limited_once = set()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _GitHubShaped)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


