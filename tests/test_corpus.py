"""The lesson-01 corpus: load_corpus on real stdlib/site-packages code, bad input, cache, full profile."""
from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path

import pytest

from course_lib.data import corpus
from course_lib.data.corpus import COLUMNS, CorpusReport, build_corpus_rows, load_corpus, load_corpus_report
from course_lib.data.filters import file_filter_reason, is_permissive_license
from course_lib.data.repos import Repo

sys.path.insert(0, str(Path(__file__).parent))
from _github_shaped import (  # noqa: E402
    MODULE_TEXT,
    _GitHubShaped,
    github_server,  # noqa: E402,F401  (fixture)
)

CFG = {"max_files_per_repo": 100, "stdlib_max_files": 0, "max_file_bytes": 2000, "min_stars": 5,
       "redact": True}


@pytest.fixture(scope="module")
def ci_corpus():
    return load_corpus("ci"), load_corpus_report("ci")


def test_load_corpus_ci_is_real_filtered_and_redacted(ci_corpus):
    ds, report = ci_corpus
    assert tuple(ds.column_names) == COLUMNS
    assert 1000 <= len(ds) <= 10_000
    assert report.files.kept == len(ds)
    assert report.files.seen == report.files.kept + sum(report.files.removed.values())
    assert report.repos_seen == report.repos_kept + len(report.repo_rejections)
    assert "python/cpython" in set(ds["repo"]) and "numpy" in set(ds["repo"])
    sample = ds.select(range(0, len(ds), max(1, len(ds) // 300)))
    for row in sample:
        assert is_permissive_license(row["license"]), row["repo"]
        assert row["size"] == len(row["content"].encode("utf-8"))
        assert row["kept_reason"].startswith("licence ")
    assert report.redactions.get("email", 0) > 0           # real author e-mails were redacted
    assert any("<EMAIL>" in c for c in sample["content"]) or report.files_redacted > 0
    assert {"too_short", "empty"} <= set(report.files.removed)
    assert any(r.startswith("licence: copyleft") for r in report.repo_rejections.values())


def test_load_corpus_uses_the_cache(ci_corpus):
    ds, _ = ci_corpus
    again = load_corpus("ci")
    assert again._fingerprint == ds._fingerprint and len(again) == len(ds)


def test_bad_input_is_counted_never_raised(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "good.py").write_text("# by wang.fang.dev@gmail.com\n" + MODULE_TEXT)
    (root / "pkg" / "latin1.py").write_bytes(b"# caf\xe9\n" * 20)
    (root / "pkg" / "blob.py").write_bytes(b"\x00\x01\x02" * 50)
    (root / "pkg" / "empty.py").write_text("")
    (root / "pkg" / "huge.py").write_text("x = 1\n" * 1000)
    (root / "pkg" / "gen_pb2.py").write_text(MODULE_TEXT)
    os.symlink(root / "pkg" / "good.py", root / "pkg" / "link.py")
    files = ("pkg/good.py", "pkg/latin1.py", "pkg/blob.py", "pkg/empty.py", "pkg/huge.py",
             "pkg/gen_pb2.py", "pkg/link.py", "pkg/vanished.py")
    repo = Repo("demo", "1", "MIT", "MIT", "test", str(root), files, 10, dt.date(2026, 1, 1))
    report = CorpusReport(profile="test")
    cols = build_corpus_rows([repo], CFG, report, progress=False)
    assert cols["path"] == ["pkg/good.py"]
    assert "<EMAIL>" in cols["content"][0] and "gmail" not in cols["content"][0]
    assert dict(report.files.removed) == {"not_utf8": 1, "binary": 1, "empty": 1, "too_large": 1,
                                          "generated_path": 1, "symlink": 1, "unreadable": 1}
    assert report.redactions == {"email": 1} and report.files_redacted == 1
    assert "redacted email×1" in cols["kept_reason"][0]


def test_per_repo_cap_is_counted(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    for i in range(5):
        (root / f"m{i}.py").write_text(MODULE_TEXT)
    repo = Repo("r", "1", "MIT", "MIT", "test", str(root), tuple(f"m{i}.py" for i in range(5)), 10,
                dt.date(2026, 1, 1))
    report = CorpusReport(profile="test")
    cols = build_corpus_rows([repo], {**CFG, "max_files_per_repo": 2}, report, progress=False)
    assert cols["path"] == ["m0.py", "m1.py"] and report.files_capped == 3


def test_load_corpus_builds_once_through_the_store(tmp_path, monkeypatch):
    import datasets

    from course_lib import store

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    calls = []

    def fake_build(profile, *, progress=True, selected=None):
        calls.append(profile.name)               # load_corpus passes the resolved profile down
        ds = datasets.Dataset.from_dict({c: ["x"] if c != "size" else [1] for c in COLUMNS})
        return ds, CorpusReport(profile=profile.name)

    monkeypatch.setattr(corpus, "build_corpus", fake_build)
    first = corpus.load_corpus("ci")
    again = corpus.load_corpus("ci")
    assert len(first) == len(again) == 1 and calls == ["ci"]
    assert store.is_complete(corpus.corpus_path("ci"))
    corpus.load_corpus("ci", rebuild=True)
    assert calls == ["ci", "ci"]


def test_full_profile_runs_against_a_github_shaped_server(github_server, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_API_URL", github_server)
    monkeypatch.setenv("GITHUB_TOKEN", "test-token-not-real")
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    ds, report = corpus.build_corpus("full", progress=False)
    assert set(ds["path"]) == {"pkg/core.py"}                 # __init__.py is too short
    assert report.repos_kept == len(set(ds["repo"])) == 12    # 6 MIT + 6 Apache-2.0 repositories
    assert all("<EMAIL>" in c for c in ds["content"])
    assert report.files.removed["too_short"] == 12
    assert any(path == "/search/repositories" for path, _, _ in _GitHubShaped.calls)
    for row in ds:
        assert file_filter_reason(row["path"], row["content"]) is None


@pytest.mark.notebooks
def test_lesson_01_records(notebook_records):
    rec = notebook_records("01")
    assert rec["repos_kept"] < rec["repos_candidates"]
    assert rec["files_kept"] == rec["corpus_rows"] and rec["files_kept"] < rec["files_seen"]
    assert {"too_short", "empty"} <= set(rec["files_removed"])
    assert rec["course_precision_dev"] >= 0.95 and rec["course_recall_dev"] >= 0.95
    assert 0.5 <= rec["course_recall_heldout"] <= 1.0
    assert rec["redactions"].get("email", 0) > 0


def test_repo_metadata_of_the_kept_repositories(ci_corpus):
    ds, _ = ci_corpus
    meta = corpus.corpus_repo_metadata("ci")
    assert set(ds["repo"]) <= set(meta)
    assert all(m["stars"] > 5 for m in meta.values())
    assert meta["python/cpython"]["license"] == "PSF-2.0"
