"""Tests of course_lib.data.dedup (lesson 02): behaviour on tiny real inputs, plus property tests."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.data import dedup
from course_lib.data.dedup import (
    MinHasher,
    UnionFind,
    choose_bands,
    choose_keeper,
    clusters_from_pairs,
    content_hash,
    exact_duplicate_groups,
    exact_jaccard_pairs,
    find_near_duplicates,
    jaccard,
    lsh_candidate_pairs,
    precision_recall,
    removal,
    s_curve,
    word_shingles,
    word_tokens,
)

CODE = '''def fib(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def main(argv):
    total = 0
    for arg in argv:
        total += fib(int(arg))
    print("total", total)
    return total
'''


def mutate(text: str, rate: float, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(l if rng.random() > rate else f"value_{rng.randrange(10**6)} = {rng.randrange(99)}"
                     for l in text.splitlines())


def test_exact_dedup_ignores_layout_only():
    a = "def f(x):\n    return x + 1\n"
    b = "def  f(x):\n\n\treturn x + 1"
    c = "def f(x):\n    return x + 2\n"
    assert content_hash(a) == content_hash(b) != content_hash(c)
    assert exact_duplicate_groups([a, c, b, a]) == [[0, 2, 3]]


def test_word_tokens_follow_bigcode_split():
    text = "x = foo.bar(baz_1, 'q') # ünï"
    import re
    assert word_tokens(text) == [t for t in re.split(r"[^A-Za-z_0-9]", text) if t]
    assert word_shingles("a b c", 5) == {"a b c"}
    assert word_shingles("", 5) == set()
    assert word_shingles("a b c d e f", 5) == {"a b c d e", "b c d e f"}
    assert dedup.char_shingles("abcdef", 5) == {"abcde", "bcdef"}
    with pytest.raises(ValueError, match="word<N>"):
        dedup.shingles("x", "words5")


@pytest.mark.parametrize("kind", ["word5", "char5"])
def test_minhash_estimates_jaccard_within_expected_error(kind):
    hasher = MinHasher(num_perm=256, shingle=kind, seed=1)
    base = CODE * 3
    errors = []
    for k, rate in enumerate([0.0, 0.1, 0.3, 0.6]):
        other = mutate(base, rate, k)
        exact = jaccard(dedup.shingles(base, kind), dedup.shingles(other, kind))
        sig = hasher.signatures([base, other])
        est = float(dedup.estimated_jaccard(sig[0], sig[1]))
        sd = max(np.sqrt(exact * (1 - exact) / 256), 1e-9)
        errors.append(abs(est - exact))
        assert abs(est - exact) <= 4 * sd + 1e-9, (rate, exact, est)
    assert errors[0] == 0.0  # identical documents give identical signatures


def test_minhash_is_deterministic_and_flags_empty_docs():
    docs = [CODE, "", "   ", "one"]
    a, b = MinHasher(64, seed=3), MinHasher(64, seed=3)
    sa, sb = a.signatures(docs), b.signatures(docs)
    assert sa.dtype == np.uint32 and sa.shape == (4, 64)
    assert np.array_equal(sa, sb)
    assert a.last_empty.tolist() == [False, True, True, False]
    assert not np.array_equal(sa[0], MinHasher(64, seed=4).signatures([CODE])[0])


def test_minhash_agrees_with_datasketch_on_the_estimate():
    import datasketch
    base, other = CODE * 4, mutate(CODE * 4, 0.25, 7)
    exact = jaccard(word_shingles(base), word_shingles(other))
    ms = []
    for text in (base, other):
        m = datasketch.MinHash(num_perm=256)
        m.update_batch([s.encode() for s in word_shingles(text)])
        ms.append(m)
    sig = MinHasher(256).signatures([base, other])
    ours = float(dedup.estimated_jaccard(sig[0], sig[1]))
    theirs = ms[0].jaccard(ms[1])
    sd = np.sqrt(exact * (1 - exact) / 256)
    assert abs(ours - exact) <= 4 * sd and abs(theirs - exact) <= 4 * sd


def test_s_curve_and_band_choice_match_datasketch():
    assert s_curve(0.0, 9, 13) == 0.0 and s_curve(1.0, 9, 13) == 1.0
    assert float(s_curve(0.5, 1, 1)) == pytest.approx(0.5)
    assert float(s_curve(0.8, 20, 5)) == pytest.approx(1 - (1 - 0.8**5) ** 20)
    assert choose_bands(0.8, 128) == (9, 13)              # datasketch's MinHashLSH default
    assert choose_bands(0.8, 128, 0.2, 0.8) == (12, 10)   # recall-leaning weights
    from datasketch.lsh import _optimal_param
    assert choose_bands(0.7, 64) == _optimal_param(0.7, 64, 0.5, 0.5)
    with pytest.raises(ValueError):
        choose_bands(1.5, 128)


def test_lsh_pairs_identical_rows_and_skips_flagged():
    sig = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [5, 6, 7, 8], [1, 2, 3, 4]], dtype=np.uint32)
    pairs = lsh_candidate_pairs(sig, bands=2, rows=2)
    assert pairs.tolist() == [[0, 1], [0, 3], [1, 3]]
    assert lsh_candidate_pairs(sig, 2, 2, skip=np.array([False, False, False, True])).tolist() == [[0, 1]]
    with pytest.raises(ValueError):
        lsh_candidate_pairs(sig, 3, 2)


def test_find_near_duplicates_on_planted_copies():
    rng = random.Random(0)
    base = [f"def func_{i}(x):\n" + "\n".join(f"    v{rng.randrange(10**6)} = x * {rng.randrange(10**6)}"
                                                for _ in range(40)) for i in range(30)]
    docs = base + [mutate(base[3], 0.02, 1), mutate(base[10], 0.02, 2), ""]
    pairs = find_near_duplicates(docs, 0.8)
    truth = exact_jaccard_pairs(docs, 0.8)
    assert (3, 30) in truth and (10, 31) in truth
    assert precision_recall(pairs, truth)["recall"] == 1.0
    assert set(pairs) <= set(truth)             # exact verification: no false positive
    assert all(i < j for i, j in pairs) and pairs == sorted(pairs)


def test_find_near_duplicates_verify_modes():
    docs = [CODE * 2, mutate(CODE * 2, 0.1, 0), "unrelated text " * 10]
    assert find_near_duplicates(docs, 0.5, verify="estimate") == [(0, 1)]
    assert (0, 1) in find_near_duplicates(docs, 0.5, verify=None)
    with pytest.raises(ValueError):
        find_near_duplicates(docs, verify="maybe")


def brute_force_pairs(docs, t):
    sets = [word_shingles(d) for d in docs]
    return [(i, j) for i, j in itertools.combinations(range(len(docs)), 2)
            if sets[i] and sets[j] and jaccard(sets[i], sets[j]) >= t]


words = st.sampled_from(["a", "b", "c", "d", "e", "f", "self", "x1"])
small_docs = st.lists(st.lists(words, min_size=0, max_size=12).map(" ".join), min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(small_docs, st.sampled_from([0.3, 0.5, 0.8, 1.0]))
def test_exact_join_equals_brute_force(docs, t):
    assert exact_jaccard_pairs(docs, t) == brute_force_pairs(docs, t)


@settings(max_examples=40, deadline=None)
@given(small_docs, st.randoms(use_true_random=False))
def test_near_duplicates_are_symmetric_sorted_and_permutation_equivariant(docs, rnd):
    pairs = find_near_duplicates(docs, 0.5, num_perm=32)
    assert pairs == sorted(pairs) and all(i < j for i, j in pairs)
    assert len(set(pairs)) == len(pairs)
    perm = list(range(len(docs)))
    rnd.shuffle(perm)                      # docs2[k] = docs[perm[k]]
    pairs2 = find_near_duplicates([docs[p] for p in perm], 0.5, num_perm=32)
    mapped = sorted(tuple(sorted((perm[i], perm[j]))) for i, j in pairs2)
    assert mapped == pairs
    assert find_near_duplicates(docs, 0.5, num_perm=32) == pairs   # same input, same output
    assert set(pairs) <= set(brute_force_pairs(docs, 0.5))


def test_union_find_clusters_and_keep_rule():
    uf = UnionFind(5)
    uf.union(0, 1)
    uf.union(3, 4)
    uf.union(1, 4)
    assert uf.find(0) == uf.find(3) != uf.find(2)
    assert clusters_from_pairs(6, [(0, 1), (4, 5), (1, 2)]) == [[0, 1, 2], [4, 5]]
    repos = ["small", "big", "big", "mid"]
    paths = ["a/b/c.py", "vendor/six.py", "six.py", "x.py"]
    assert choose_keeper([0, 1, 2, 3], repos, paths, {"big": 100, "mid": 10}) == 2   # stars, then path
    assert choose_keeper([0, 3], repos, paths, None) == 3                             # shortest path
    assert choose_keeper([0, 1], repos, paths, [50, 1, 1, 1]) == 0


def test_deduplicate_reports_every_removed_file():
    near = CODE * 2 + CODE.replace('print("total", total)', 'print("sum", total)')
    docs = [CODE * 3, CODE * 3 + "\n\n", near, "print('something else entirely')\n" * 5]
    result = dedup.deduplicate(docs, ["r1", "r2", "r3", "r4"], ["a.py", "b.py", "c.py", "d.py"],
                               stars={"r2": 50, "r3": 1})
    assert result.keep == [1, 3]
    by_index = {r["index"]: r for r in result.removed}
    assert by_index[0]["reason"] == "exact_duplicate" and by_index[0]["duplicate_of"] == 1
    assert by_index[2]["reason"] == "near_duplicate" and by_index[2]["jaccard"] >= 0.8
    assert result.summary() == {"kept": 2, "removed": 2, "exact_duplicate": 1, "near_duplicate": 1}
    with pytest.raises(ValueError, match="same length"):
        dedup.deduplicate(docs, ["r"], ["p"])


def test_load_deduped_corpus_builds_caches_and_reports(tmp_path, monkeypatch):
    import datasets
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    rows = {"repo": ["a", "b", "b"], "path": ["x.py", "y/x.py", "z.py"],
            "license": ["MIT"] * 3, "language": ["Python"] * 3,
            "content": [CODE * 2, CODE * 2, "import os\nprint(os.sep)\n" * 3],
            "size": [1, 1, 1], "kept_reason": ["ok"] * 3}
    calls = []

    def fake_corpus(profile, rebuild=False):
        calls.append(profile)
        return datasets.Dataset.from_dict(rows)

    monkeypatch.setattr(removal, "_corpus", fake_corpus)
    ds = dedup.load_deduped_corpus("ci")
    assert ds["path"] == ["x.py", "z.py"] and ds.column_names == list(rows)
    report = dedup.load_dedup_report("ci")
    assert report["removed"] == 1 and report["removed_files"][0]["path"] == "y/x.py"
    assert report["removed_files"][0]["duplicate_of_path"] == "x.py"
    again = dedup.load_deduped_corpus("ci")          # from the cache
    assert again["path"] == ds["path"]
    assert list((tmp_path / "dedup").iterdir())


@pytest.mark.notebooks
def test_lesson_02_records(notebook_records):
    rec = notebook_records("02")
    assert rec["real_precision"] == 1.0 and rec["real_recall"] >= 0.95
    assert rec["planted_precision"] == 1.0 and rec["planted_recall"] >= 0.95
    assert rec["dedup_removed"] > 0 and rec["dedup_kept"] > rec["dedup_removed"]
    assert rec["minhash_max_abs_error"]["course_lib"] < 0.2
    assert rec["repo_level_pairs_real"] >= 0 and rec["repos_left_incomplete"] >= 0
    from course_lib.tooling import environments

    if environments.status("datatrove")["ready"]:   # ./course setup creates .venv-datatrove
        assert rec["datatrove_ran"] is True
        assert rec["datatrove_only_jaccard_median"] < 0.8 if "datatrove_only_jaccard_median" in rec else True


def test_find_near_duplicates_rejects_a_single_string():
    with pytest.raises(TypeError, match="single str"):
        dedup.find_near_duplicates("text")
    with pytest.raises(TypeError, match="document 1"):
        dedup.find_near_duplicates(["a b c", 3])


def test_repo_level_dedup_keeps_or_drops_whole_repositories():
    base = [" ".join(f"w{(i * 7 + k) % 97} v{k}" for k in range(120)) for i in range(4)]
    fork = list(base)
    fork[1] = fork[1].replace("v3 ", "v3x ", 1)
    docs = base + fork + ["unrelated text " * 40]
    repos = ["orig"] * 4 + ["fork"] * 4 + ["other"]
    paths = [f"m{i}.py" for i in range(4)] * 2 + ["x.py"]
    out = dedup.repo_level_duplicates(docs, repos, paths)
    assert out["clusters"] == [["fork", "orig"]]
    assert out["pairs"][0][:2] == ("fork", "orig") and out["pairs"][0][2] > 0.9
    removed = [{"repo": "fork"}, {"repo": "other"}]
    assert dedup.partially_removed_repos(removed, repos) == {"fork": (1, 4)}
