"""Deduplication of a code corpus: exact hashes, shingles, MinHash, LSH banding, clusters, keep rule.

The pipeline of lesson 02, in the order the lesson builds it:

1. exact dedup — :func:`content_hash` of whitespace-normalised content, :func:`exact_duplicate_groups`;
2. shingles — :func:`word_shingles` (bigcode's ``[^A-Za-z_0-9]`` word tokens, n-grams) and
   :func:`char_shingles`; :func:`jaccard` is the similarity MinHash estimates;
3. MinHash — :class:`MinHasher`, a vectorised numpy implementation (hash every shingle once, then one
   matrix of ``(a*x + b) >> 32`` multiply-add-shift permutations and a segmented ``min`` per document);
4. LSH banding — :func:`s_curve`, :func:`choose_bands`, :func:`lsh_candidate_pairs`;
5. verification — estimated (signature agreement) or exact Jaccard, :func:`find_near_duplicates`;
6. clusters and the keep rule — :class:`UnionFind`, :func:`clusters_from_pairs`, :func:`choose_keeper`;
7. the lesson's artefact — :func:`load_deduped_corpus` (cached) and :func:`load_dedup_report`.

:func:`exact_jaccard_pairs` is the ground truth (an exact similarity join with prefix filtering) that
precision and recall are measured against. Introduced in lesson 02.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

WORD_RE = re.compile(r"[A-Za-z_0-9]+")
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_NGRAM_MULT = np.uint64(0x9E3779B97F4A7C15)   # golden-ratio constant: mixes the n-gram polynomial
_FMIX_1 = np.uint64(0xFF51AFD7ED558CCD)       # murmur3's 64-bit finaliser constants
_FMIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_MAX_SIG = np.uint32(0xFFFFFFFF)


# --- 1. exact dedup ---------------------------------------------------------------------------------

def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace into one space and strip the ends. Introduced in lesson 02."""
    return " ".join(text.split())


def content_hash(text: str) -> str:
    """SHA-256 (hex) of the whitespace-normalised text: equal hashes = exact duplicates up to layout.

    Introduced in lesson 02.
    """
    return hashlib.sha256(normalize_whitespace(text).encode("utf-8", "surrogatepass")).hexdigest()


def exact_duplicate_groups(docs: Sequence[str]) -> list[list[int]]:
    """Groups (size >= 2) of indices whose :func:`content_hash` is equal, each sorted, ordered by
    their first index. Introduced in lesson 02."""
    by_hash: dict[str, list[int]] = {}
    for i, doc in enumerate(docs):
        by_hash.setdefault(content_hash(doc), []).append(i)
    return sorted((g for g in by_hash.values() if len(g) > 1), key=lambda g: g[0])


# --- 2. shingles and Jaccard ------------------------------------------------------------------------

def word_tokens(text: str) -> list[str]:
    """Word tokens as in bigcode's near-dedup: maximal runs of ``[A-Za-z_0-9]`` (the text split on
    ``[^A-Za-z_0-9]``, empty pieces dropped). Introduced in lesson 02."""
    return WORD_RE.findall(text)


def word_shingles(text: str, n: int = 5) -> set[str]:
    """The set of word n-grams (tokens joined by a space). A text with fewer than ``n`` (but at least
    one) tokens gives one shingle, the whole token list; a text without tokens gives the empty set.

    Introduced in lesson 02.
    """
    tokens = word_tokens(text)
    if not tokens:
        return set()
    if len(tokens) < n:
        return {" ".join(tokens)}
    return {" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def char_shingles(text: str, n: int = 5) -> set[str]:
    """The set of character n-grams of ``text`` (the whole text when shorter than ``n``; empty text
    gives the empty set). Introduced in lesson 02."""
    if not text:
        return set()
    if len(text) < n:
        return {text}
    return {text[i:i + n] for i in range(len(text) - n + 1)}


def parse_shingle_kind(kind: str) -> tuple[str, int]:
    """``"word5"`` -> ``("word", 5)``, ``"char7"`` -> ``("char", 7)``. Introduced in lesson 02."""
    m = re.fullmatch(r"(word|char)(\d+)", kind)
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"shingle kind {kind!r} not understood: use 'word<N>' or 'char<N>', e.g. 'word5'")
    return m.group(1), int(m.group(2))


def shingles(text: str, kind: str = "word5") -> set[str]:
    """Shingles of ``text`` named by ``kind`` (``"word5"``, ``"char5"``, ...). Introduced in lesson 02."""
    unit, n = parse_shingle_kind(kind)
    return word_shingles(text, n) if unit == "word" else char_shingles(text, n)


def jaccard(a: set, b: set) -> float:
    """|A ∩ B| / |A ∪ B|; two empty sets have Jaccard 0 here (an empty file is nobody's near-duplicate:
    exact dedup handles empties). Introduced in lesson 02."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


# --- 3. MinHash -------------------------------------------------------------------------------------

def _fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3's finaliser on a uint64 array (wrapping arithmetic): spreads every input bit."""
    x = x ^ (x >> np.uint64(33))
    x = x * _FMIX_1
    x = x ^ (x >> np.uint64(33))
    x = x * _FMIX_2
    return x ^ (x >> np.uint64(33))


class MinHasher:
    """Vectorised MinHash signatures (``num_perm`` uint32 values per document).

    How it works: each token (word or character) is hashed once into 64 bits; an n-gram's hash is a
    polynomial of its tokens' hashes (numpy, wrapping uint64), finalised with murmur3's mixer and cut
    to 32 bits ``x``. The permutations are the multiply-add-shift family
    ``h_k(x) = ((a_k * x + b_k) mod 2^64) >> 32`` with random 64-bit ``a_k, b_k`` (a strongly universal
    family), computed for all shingles of a chunk of documents at once as one ``(shingles, num_perm)``
    matrix; ``np.minimum.reduceat`` takes each document's column minima. Duplicated shingles do not
    change a minimum, so no per-document ``set`` is needed.

    A document without shingles gets an all-``0xFFFFFFFF`` signature and is flagged in
    :attr:`last_empty`; LSH ignores such rows. Introduced in lesson 02.
    """

    def __init__(self, num_perm: int = 128, shingle: str = "word5", seed: int = 0,
                 chunk_shingles: int = 8192):
        if num_perm < 1:
            raise ValueError(f"num_perm must be >= 1, got {num_perm}")
        self.num_perm = int(num_perm)
        self.shingle = shingle
        self.unit, self.n = parse_shingle_kind(shingle)
        self.seed = seed
        self.chunk_shingles = int(chunk_shingles)
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, 2**63, size=self.num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        self.b = rng.integers(0, 2**63, size=self.num_perm, dtype=np.uint64) * np.uint64(2)
        self.last_empty = np.zeros(0, dtype=bool)

    # one document -> its 32-bit shingle hashes (with repeats)
    def shingle_hashes(self, text: str, token_cache: dict[str, int] | None = None) -> np.ndarray:
        """The 32-bit hashes (uint64 array, values < 2**32) of ``text``'s shingles, with repeats."""
        if self.unit == "word":
            tokens = WORD_RE.findall(text)
            if not tokens:
                return np.zeros(0, dtype=np.uint64)
            cache = {} if token_cache is None else token_cache
            ids = []
            for tok in tokens:
                h = cache.get(tok)
                if h is None:
                    h = int.from_bytes(hashlib.blake2b(tok.encode("utf-8", "surrogatepass"),
                                                       digest_size=8).digest(), "little")
                    cache[tok] = h
                ids.append(h)
            t = np.array(ids, dtype=np.uint64)
        else:
            if not text:
                return np.zeros(0, dtype=np.uint64)
            t = _fmix64(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
                        .astype(np.uint64) + np.uint64(0x632BE59BD9B4E019))
        n = min(self.n, len(t))
        m = len(t) - n + 1
        g = t[:m].copy()
        for j in range(1, n):
            g *= _NGRAM_MULT
            g += t[j:j + m]
        g += np.uint64(n)  # a 3-token text and a 3-gram of a longer text hash alike only if equal
        return _fmix64(g) >> np.uint64(32)

    def signatures(self, docs: Iterable[str], progress: bool = False) -> np.ndarray:
        """A ``(len(docs), num_perm)`` uint32 matrix of MinHash signatures."""
        docs = list(docs)
        out = np.full((len(docs), self.num_perm), _MAX_SIG, dtype=np.uint32)
        self.last_empty = np.zeros(len(docs), dtype=bool)
        cache: dict[str, int] = {}
        pending: list[np.ndarray] = []
        pending_rows: list[int] = []
        pending_size = 0
        iterator = range(len(docs))
        if progress:
            from tqdm.auto import tqdm
            iterator = tqdm(iterator, desc="MinHash", unit="doc")
        for i in iterator:
            hashes = self.shingle_hashes(docs[i], cache)
            if len(hashes) == 0:
                self.last_empty[i] = True
                continue
            pending.append(hashes)
            pending_rows.append(i)
            pending_size += len(hashes)
            if pending_size >= self.chunk_shingles:
                self._flush(pending, pending_rows, out)
                pending, pending_rows, pending_size = [], [], 0
        if pending:
            self._flush(pending, pending_rows, out)
        return out

    def _flush(self, pending: list[np.ndarray], rows: list[int], out: np.ndarray) -> None:
        x = np.concatenate(pending)
        starts = np.zeros(len(pending), dtype=np.int64)
        np.cumsum([len(p) for p in pending[:-1]], out=starts[1:])
        h = np.multiply.outer(x, self.a)      # (shingles, num_perm), wraps mod 2**64
        h += self.b
        h >>= np.uint64(32)
        out[rows] = np.minimum.reduceat(h, starts, axis=0).astype(np.uint32)

    def signature(self, text: str) -> np.ndarray:
        """The signature of one document (``num_perm`` uint32 values)."""
        return self.signatures([text])[0]


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float | np.ndarray:
    """Share of equal signature positions: MinHash's estimate of Jaccard (rows if 2-D arrays).

    Its standard error is ``sqrt(J (1 - J) / num_perm)``. Introduced in lesson 02.
    """
    eq = np.asarray(sig_a) == np.asarray(sig_b)
    return eq.mean(axis=-1)


# --- 4. LSH banding ---------------------------------------------------------------------------------

def s_curve(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """Probability that two documents with Jaccard ``s`` share at least one of ``bands`` bands of
    ``rows`` rows: ``1 - (1 - s**rows) ** bands``. Introduced in lesson 02."""
    s = np.asarray(s, dtype=float)
    return 1.0 - (1.0 - s ** rows) ** bands


def _trapezoid(y: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def banding_errors(threshold: float, bands: int, rows: int, grid: int = 2001) -> tuple[float, float]:
    """(false-positive area, false-negative area) of a banding: the integral of the S-curve below the
    threshold and of ``1 - S`` above it (datasketch's definition). Introduced in lesson 02."""
    lo = np.linspace(0.0, threshold, grid)
    hi = np.linspace(threshold, 1.0, grid)
    fp = _trapezoid(s_curve(lo, bands, rows), lo)
    fn = _trapezoid(1.0 - s_curve(hi, bands, rows), hi)
    return fp, fn


def choose_bands(threshold: float, num_perm: int, fp_weight: float = 0.5,
                 fn_weight: float = 0.5) -> tuple[int, int]:
    """The (bands, rows) with ``bands * rows <= num_perm`` that minimise
    ``fp_weight * FP + fn_weight * FN`` (see :func:`banding_errors`). Raise ``fn_weight`` when the
    candidates are verified afterwards: a false positive then costs only a check, a false negative is
    a duplicate you keep. Introduced in lesson 02."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    best, best_err = (1, num_perm), math.inf
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp, fn = banding_errors(threshold, b, r, grid=201)
            err = fp_weight * fp + fn_weight * fn
            if err < best_err - 1e-15:
                best, best_err = (b, r), err
    return best


def lsh_candidate_pairs(signatures: np.ndarray, bands: int, rows: int,
                        skip: np.ndarray | None = None) -> np.ndarray:
    """Index pairs (i < j), shape ``(k, 2)``, sorted, unique, of documents whose signatures agree on
    all ``rows`` values of at least one band. Rows flagged in ``skip`` (e.g. empty documents) never
    pair. Introduced in lesson 02."""
    n, num_perm = signatures.shape
    if bands * rows > num_perm:
        raise ValueError(f"bands*rows = {bands}*{rows} exceeds num_perm = {num_perm}")
    alive = np.arange(n) if skip is None else np.flatnonzero(~np.asarray(skip, dtype=bool))
    codes: list[np.ndarray] = []
    sig = signatures[alive].astype(np.uint64)
    for band in range(bands):
        key = np.full(len(alive), 0x84222325CBF29CE4, dtype=np.uint64)
        for col in range(band * rows, (band + 1) * rows):
            key = _fmix64(key ^ sig[:, col])
        order = np.argsort(key, kind="stable")
        sorted_keys = key[order]
        if len(sorted_keys) < 2:
            continue
        same = sorted_keys[1:] == sorted_keys[:-1]
        if not same.any():
            continue
        # runs of equal keys -> buckets
        edges = np.flatnonzero(np.diff(np.concatenate(([0], same.astype(np.int8), [0]))))
        for start, stop in zip(edges[::2], edges[1::2]):
            members = np.sort(alive[order[start:stop + 1]])
            ii, jj = np.triu_indices(len(members), k=1)
            codes.append(members[ii].astype(np.int64) * n + members[jj])
    if not codes:
        return np.zeros((0, 2), dtype=np.int64)
    flat = np.unique(np.concatenate(codes))
    return np.stack([flat // n, flat % n], axis=1)


# --- 5. verification and the public entry point -----------------------------------------------------

def find_near_duplicates(docs: Sequence[str], threshold: float = 0.8, *, num_perm: int = 128,
                         shingle: str = "word5", bands: int | None = None, rows: int | None = None,
                         verify: str | None = "exact", seed: int = 0) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, sorted, judged near-duplicates at Jaccard >= ``threshold``.

    MinHash signatures (:class:`MinHasher`) -> LSH candidates (:func:`lsh_candidate_pairs`, banding from
    :func:`choose_bands` with a recall-leaning weight 0.2/0.8 unless ``bands``/``rows`` are given) ->
    verification: ``"exact"`` keeps pairs whose exact shingle Jaccard reaches the threshold (precision
    1 against exact Jaccard; recall = the banding's), ``"estimate"`` uses signature agreement, ``None``
    keeps every candidate. Documents without shingles are never reported. Introduced in lesson 02.
    """
    if verify not in ("exact", "estimate", None):
        raise ValueError(f"verify must be 'exact', 'estimate' or None, got {verify!r}")
    docs = list(docs)
    if bands is None or rows is None:
        bands, rows = choose_bands(threshold, num_perm, fp_weight=0.2, fn_weight=0.8)
    hasher = MinHasher(num_perm=num_perm, shingle=shingle, seed=seed)
    sig = hasher.signatures(docs)
    cand = lsh_candidate_pairs(sig, bands, rows, skip=hasher.last_empty)
    return verify_pairs(docs, cand, threshold, verify=verify, signatures=sig, shingle=shingle)


def verify_pairs(docs: Sequence[str], candidates: np.ndarray, threshold: float, *,
                 verify: str | None = "exact", signatures: np.ndarray | None = None,
                 shingle: str = "word5") -> list[tuple[int, int]]:
    """Keep the candidate pairs whose exact (``"exact"``) or estimated (``"estimate"``) Jaccard reaches
    ``threshold``; ``None`` keeps all. Returns sorted ``(i, j)`` tuples. Introduced in lesson 02."""
    candidates = np.asarray(candidates, dtype=np.int64).reshape(-1, 2)
    if verify is None or len(candidates) == 0:
        return [(int(i), int(j)) for i, j in candidates]
    if verify == "estimate":
        if signatures is None:
            raise ValueError("verify='estimate' needs the signatures")
        est = estimated_jaccard(signatures[candidates[:, 0]], signatures[candidates[:, 1]])
        keep = candidates[est >= threshold]
        return [(int(i), int(j)) for i, j in keep]
    cache: dict[int, set] = {}

    def sh(i: int) -> set:
        if i not in cache:
            cache[i] = shingles(docs[i], shingle)
        return cache[i]

    kept = []
    for i, j in candidates:
        i, j = int(i), int(j)
        a, b = sh(i), sh(j)
        small, large = sorted((len(a), len(b)))
        if large == 0 or small < threshold * large - 1e-9:   # length filter: J <= small/large
            continue
        if jaccard(a, b) >= threshold - 1e-12:
            kept.append((i, j))
    return kept


def exact_jaccard_pairs(docs: Sequence[str], threshold: float = 0.8,
                        shingle: str = "word5") -> list[tuple[int, int]]:
    """Every pair (i < j) with exact shingle Jaccard >= ``threshold``: the ground truth.

    An exact similarity join with prefix filtering (AllPairs): order shingles rarest first; two sets
    with ``J >= t`` must share one of the first ``|A| - ceil(t |A|) + 1`` shingles of each, so only
    documents that share a prefix shingle are compared (plus a length filter). Exact, and fast at high
    thresholds; MinHash/LSH is what still works when the corpus does not fit one machine.
    Introduced in lesson 02.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    sets = [shingles(d, shingle) for d in docs]
    ids: dict[str, int] = {}
    id_lists = [np.fromiter((ids.setdefault(x, len(ids)) for x in s), dtype=np.int64, count=len(s))
                for s in sets]
    freq = np.bincount(np.concatenate(id_lists), minlength=len(ids)) if ids else np.zeros(0, np.int64)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.argsort(freq, kind="stable")] = np.arange(len(ids))   # rarest shingle first
    ranked = [np.sort(rank[a]).tolist() for a in id_lists]
    int_sets = [set(r) for r in ranked]
    order = sorted((i for i in range(len(docs)) if sets[i]), key=lambda i: (len(sets[i]), i))
    index: dict[int, list[int]] = {}
    pairs = []
    for i in order:
        size = len(ranked[i])
        prefix = size - math.ceil(threshold * size - 1e-9) + 1
        seen: set[int] = set()
        for tok in ranked[i][:prefix]:
            for j in index.get(tok, ()):
                if j in seen or len(ranked[j]) < threshold * size - 1e-9:
                    continue
                seen.add(j)
                inter = len(int_sets[i] & int_sets[j])
                if inter / (size + len(ranked[j]) - inter) >= threshold - 1e-12:
                    pairs.append((min(i, j), max(i, j)))
            index.setdefault(tok, []).append(i)
    return sorted(pairs)


def precision_recall(found: Iterable[tuple[int, int]], truth: Iterable[tuple[int, int]]) -> dict[str, float]:
    """Precision, recall (and counts) of ``found`` pairs against ``truth`` pairs; an empty side scores 1.

    Introduced in lesson 02.
    """
    found, truth = set(map(tuple, found)), set(map(tuple, truth))
    tp = len(found & truth)
    return {"precision": tp / len(found) if found else 1.0,
            "recall": tp / len(truth) if truth else 1.0,
            "found": len(found), "truth": len(truth), "true_positives": tp}


# --- 6. clusters and the keep rule ------------------------------------------------------------------

class UnionFind:
    """Disjoint sets over ``0..n-1`` with path halving and union by size. Introduced in lesson 02."""

    def __init__(self, n: int):
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return ra


def clusters_from_pairs(n: int, pairs: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Connected components (size >= 2) of the near-duplicate graph, each sorted, ordered by first
    member. Near-duplication is not transitive: a cluster can hold two files below the threshold that
    are linked through a third. Introduced in lesson 02."""
    uf = UnionFind(n)
    for i, j in pairs:
        uf.union(int(i), int(j))
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(uf.find(i), []).append(i)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def keeper_key(stars: int | float | None, repo: str, path: str) -> tuple:
    """Sort key of the keep rule (smallest wins): most stars, then shortest path, then repo and path
    in alphabetical order (so the choice is deterministic). Introduced in lesson 02."""
    return (-(stars or 0), len(path), repo, path)


def choose_keeper(members: Sequence[int], repos: Sequence[str], paths: Sequence[str],
                  stars: Mapping[str, int] | Sequence[int] | None = None) -> int:
    """The member of a cluster to keep: the copy from the repository with most stars (Stack v2's rule),
    then the shortest path, then alphabetical. ``stars`` maps repo -> stars, or is a per-row sequence.
    Introduced in lesson 02."""
    def star(i: int) -> int:
        if stars is None:
            return 0
        if isinstance(stars, Mapping):
            return int(stars.get(repos[i], 0) or 0)
        return int(stars[i] or 0)
    return min(members, key=lambda i: keeper_key(star(i), repos[i], paths[i]))


@dataclass
class DedupResult:
    """What :func:`deduplicate` decided: kept indices, and one record per removed file."""

    keep: list[int]
    removed: list[dict[str, Any]] = field(default_factory=list)
    exact_groups: list[list[int]] = field(default_factory=list)
    near_pairs: list[tuple[int, int]] = field(default_factory=list)
    clusters: list[list[int]] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        reasons: dict[str, int] = {}
        for r in self.removed:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
        return {"kept": len(self.keep), "removed": len(self.removed), **reasons}


def deduplicate(docs: Sequence[str], repos: Sequence[str], paths: Sequence[str], *,
                stars: Mapping[str, int] | Sequence[int] | None = None, threshold: float = 0.8,
                num_perm: int = 128, shingle: str = "word5", verify: str | None = "exact",
                seed: int = 0) -> DedupResult:
    """Exact dedup, then near dedup of the survivors, one keeper per cluster (:func:`choose_keeper`).

    Every removed file gets a record: its index, repo, path, ``reason`` (``exact_duplicate`` or
    ``near_duplicate``), the index/repo/path it duplicates (the cluster's keeper) and, for near
    duplicates, the exact Jaccard with that keeper. Introduced in lesson 02.
    """
    n = len(docs)
    if not (len(repos) == len(paths) == n):
        raise ValueError(f"docs, repos and paths must have the same length ({n}, {len(repos)}, {len(paths)})")
    removed: list[dict[str, Any]] = []

    def record(i: int, keeper: int, reason: str, jac: float | None = None) -> None:
        removed.append({"index": i, "repo": repos[i], "path": paths[i], "reason": reason,
                        "duplicate_of": keeper, "duplicate_of_repo": repos[keeper],
                        "duplicate_of_path": paths[keeper], "jaccard": jac})

    groups = exact_duplicate_groups(docs)
    gone: set[int] = set()
    for g in groups:
        keeper = choose_keeper(g, repos, paths, stars)
        for i in g:
            if i != keeper:
                record(i, keeper, "exact_duplicate", 1.0)
                gone.add(i)
    survivors = [i for i in range(n) if i not in gone]
    local_pairs = find_near_duplicates([docs[i] for i in survivors], threshold, num_perm=num_perm,
                                       shingle=shingle, verify=verify, seed=seed)
    pairs = [(survivors[a], survivors[b]) for a, b in local_pairs]
    clusters = clusters_from_pairs(n, pairs)
    for c in clusters:
        keeper = choose_keeper(c, repos, paths, stars)
        keep_sh = shingles(docs[keeper], shingle)
        for i in c:
            if i != keeper:
                record(i, keeper, "near_duplicate", round(jaccard(keep_sh, shingles(docs[i], shingle)), 4))
                gone.add(i)
    removed.sort(key=lambda r: r["index"])
    return DedupResult(keep=[i for i in range(n) if i not in gone], removed=removed,
                       exact_groups=groups, near_pairs=pairs, clusters=clusters)


# --- 7. the lesson's artefact -----------------------------------------------------------------------

def _corpus(profile: str, rebuild: bool = False):
    try:
        from course_lib.corpus import load_corpus
    except ImportError:  # lesson 01's module not merged yet: a small stand-in with the same columns
        from course_lib._devcorpus import load_corpus
    return load_corpus(profile=profile, rebuild=rebuild)


def _stars_for(corpus) -> Mapping[str, int] | Sequence[int] | None:
    """Stars per row when the corpus carries them (a ``stars`` column), else the repository table of
    lesson 01 when it offers one, else None (then the shortest path decides)."""
    if "stars" in corpus.column_names:
        return list(corpus["stars"])
    try:  # lesson 01's repository table, when it exposes stars
        from course_lib import repos as repos_mod  # noqa: F401
        table = getattr(repos_mod, "repo_stars", None)
        if callable(table):
            return dict(table())
    except Exception:  # noqa: BLE001 - optional source of stars
        pass
    return None


def corpus_fingerprint(corpus) -> str:
    """A content hash of a corpus (repo, path, content of every row, in order): the cache key part that
    changes when lesson 01's output changes. Introduced in lesson 02."""
    h = hashlib.sha256()
    for repo, path, text in zip(corpus["repo"], corpus["path"], corpus["content"]):
        for part in (repo, path, text):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
    return h.hexdigest()[:16]


def _dedup_folder(profile: str, corpus) -> Any:
    from course_lib.paths import cache_dir
    from course_lib.profiles import get_profile

    cfg = dict(get_profile(profile).dedup)
    fingerprint = corpus_fingerprint(corpus)
    key = hashlib.sha256(json.dumps({"cfg": cfg, "corpus": fingerprint, "v": 1},
                                    sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir("dedup") / f"{profile}-{key}", cfg


def load_deduped_corpus(profile: str = "ci", rebuild: bool = False):
    """Lesson 01's corpus after exact and near dedup (a ``datasets.Dataset``, same columns), cached in
    ``cache_dir("dedup")`` under a key of the profile's ``dedup`` settings and the corpus fingerprint;
    built from ``course_lib.corpus.load_corpus`` when missing (or ``rebuild=True``). The report of what
    was removed is in :func:`load_dedup_report`. Introduced in lesson 02.
    """
    import datasets

    corpus = _corpus(profile, rebuild=False)
    folder, cfg = _dedup_folder(profile, corpus)
    if (folder / "dataset").is_dir() and (folder / "report.json").exists() and not rebuild:
        return datasets.load_from_disk(str(folder / "dataset"))
    result = deduplicate(corpus["content"], corpus["repo"], corpus["path"], stars=_stars_for(corpus),
                         threshold=cfg["threshold"], num_perm=cfg["num_perm"], shingle=cfg["shingle"],
                         verify=cfg.get("verify", "exact"))
    kept = corpus.select(result.keep)
    report = {"profile": profile, "config": cfg, "input_files": len(corpus), **result.summary(),
              "stars_known": _stars_for(corpus) is not None,
              "keep_rule": "most stars, then shortest path, then alphabetical (repo, path)",
              "removed_files": result.removed,
              "clusters": [[corpus["path"][i] for i in c] for c in result.clusters[:200]]}
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    kept.save_to_disk(str(tmp / "dataset"))
    (tmp / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    print(f"dedup ({profile}): {len(corpus)} files -> kept {len(kept)}; removed "
          f"{report.get('exact_duplicate', 0)} exact and {report.get('near_duplicate', 0)} near duplicates "
          f"(report: {folder / 'report.json'})")
    return datasets.load_from_disk(str(folder / "dataset"))


def load_dedup_report(profile: str = "ci") -> dict[str, Any]:
    """The report of :func:`load_deduped_corpus` (counts, config, one record per removed file, the
    first clusters), building the deduped corpus first when needed. Introduced in lesson 02."""
    corpus = _corpus(profile)
    folder, _ = _dedup_folder(profile, corpus)
    if not (folder / "report.json").exists():
        load_deduped_corpus(profile)
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))
