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
import re
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

MERSENNE_61 = (1 << 61) - 1


def minhash_params(num_perm: int = 16, seed: int = 0) -> list[tuple[int, int]]:
    """``num_perm`` pairs ``(a, b)`` with ``1 <= a < 2**61-1`` and ``0 <= b < 2**61-1`` for the textbook
    permutations ``h(x) = (a*x + b) mod (2**61 - 1)``. Introduced in lesson 02."""
    import random

    rng = random.Random(seed)
    return [(rng.randrange(1, MERSENNE_61), rng.randrange(0, MERSENNE_61)) for _ in range(num_perm)]


def textbook_minhash(shingle_set: Iterable[str], params: Sequence[tuple[int, int]]) -> list[int]:
    """The from-scratch MinHash of lesson 02's exercise, in plain Python: each shingle's base hash is
    ``zlib.crc32(shingle.encode("utf-8"))``; for each ``(a, b)`` the signature value is the minimum of
    ``(a * x + b) % (2**61 - 1)`` over the shingles (``2**61 - 1`` for an empty set).
    Introduced in lesson 02."""
    import zlib

    base = [zlib.crc32(s.encode("utf-8")) for s in shingle_set]
    return [min(((a * x + b) % MERSENNE_61 for x in base), default=MERSENNE_61) for a, b in params]


def _fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3's finaliser on a uint64 array (wrapping arithmetic): spreads every input bit."""
    x = x ^ (x >> np.uint64(33))
    x = x * _FMIX_1
    x = x ^ (x >> np.uint64(33))
    x = x * _FMIX_2
    return x ^ (x >> np.uint64(33))


_WORD_BYTES = np.zeros(256, dtype=bool)
_WORD_BYTES[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789", np.uint8)] = True
_BYTE_BASE = 0x100000001B3                         # odd, so it has an inverse mod 2**64
_POW = np.array([_BYTE_BASE], dtype=np.uint64)     # _POW[i] = base**(i+1) mod 2**64
_INV_POW = np.array([pow(_BYTE_BASE, -1, 2**64)], dtype=np.uint64)
_HIGH_HALF = 1 if np.little_endian else 0


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """base**(i+1) and base**-(i+1) mod 2**64 for i < n, grown by doubling and cached."""
    global _POW, _INV_POW
    while len(_POW) < n:
        _POW = np.concatenate([_POW, _POW * _POW[-1]])
        _INV_POW = np.concatenate([_INV_POW, _INV_POW * _INV_POW[-1]])
    return _POW, _INV_POW


def _ngram_hash(t: np.ndarray, n: int, m: int) -> np.ndarray:
    """Polynomial hash of the ``m`` windows of ``n`` consecutive token hashes, finalised to 32 bits."""
    g = t[:m].copy()
    for j in range(1, n):
        g *= _NGRAM_MULT
        g += t[j:j + m]
    g += np.uint64(n)  # a 3-token text and a 3-gram of a longer text hash alike only if equal
    return _fmix64(g) >> np.uint64(32)


def word_shingle_hashes(texts: Sequence[str], n: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of the word n-gram shingles of several texts at once, all in numpy.

    Returns ``(x, doc)``: 32-bit shingle hashes (uint64 values < 2**32, repeats kept) and the index of
    the text each belongs to, sorted by text. The texts are joined (UTF-8) with newlines; word bytes
    are ``[A-Za-z_0-9]`` (bigcode's tokens, ASCII like its regex); each token's hash is a polynomial of
    its bytes from prefix sums (``sum c_k B^k`` divided by ``B^start``), finalised with murmur3's
    mixer; each n-gram's hash is a polynomial of its token hashes within one text. A text with fewer
    than ``n`` tokens gets one shingle of all its tokens, as :func:`word_shingles`. Introduced in
    lesson 02."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    buf = np.frombuffer(b"\n".join(encoded) + b"\n", dtype=np.uint8)
    doc_end = np.cumsum([len(e) + 1 for e in encoded])
    is_word = _WORD_BYTES[buf].astype(np.int8)
    edge = np.diff(is_word, prepend=np.int8(0), append=np.int8(0))
    start, end = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
    if len(start) == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    powers, inv_powers = _powers(len(buf))
    prefix = np.zeros(len(buf) + 1, dtype=np.uint64)
    np.cumsum(buf.astype(np.uint64) * powers[:len(buf)], out=prefix[1:])
    tok = (prefix[end] - prefix[start]) * inv_powers[start] + (end - start).astype(np.uint64)
    tok = _fmix64(tok)
    tok_doc = np.searchsorted(doc_end, start, side="right")
    counts = np.bincount(tok_doc, minlength=len(texts))
    xs, docs = [], []
    if len(tok) >= n:
        m = len(tok) - n + 1
        x = _ngram_hash(tok, n, m)
        inside = tok_doc[:m] == tok_doc[n - 1:]      # the window stays in one text
        xs.append(x[inside])
        docs.append(tok_doc[:m][inside])
    short = np.flatnonzero((counts > 0) & (counts < n))
    if len(short):
        first = np.searchsorted(tok_doc, short)
        for d, f in zip(short.tolist(), first.tolist()):
            c = int(counts[d])
            xs.append(_ngram_hash(tok[f:f + c], c, 1))
            docs.append(np.array([d], dtype=np.int64))
    x, doc = np.concatenate(xs), np.concatenate(docs).astype(np.int64)
    if len(short):
        order = np.argsort(doc, kind="stable")
        x, doc = x[order], doc[order]
    return x, doc


class MinHasher:
    """Vectorised MinHash signatures (``num_perm`` uint32 values per document).

    How it works: shingles are hashed to 32 bits ``x`` in numpy (:func:`word_shingle_hashes`: every
    token's hash from prefix sums over the bytes, n-grams as polynomials of token hashes; character
    shingles per document from code points). The permutations are the multiply-add-shift family
    ``h_k(x) = ((a_k * x + b_k) mod 2^64) >> 32`` with random 64-bit ``a_k, b_k`` (strongly universal),
    computed for all shingles of a chunk of documents at once as one ``(num_perm, shingles)`` matrix
    whose high 32-bit halves ``np.minimum.reduceat`` reduces per document. Duplicated shingles do not
    change a minimum, so no per-document ``set`` is needed.

    A document without shingles gets an all-``0xFFFFFFFF`` signature and is flagged in
    :attr:`last_empty`; LSH ignores such rows. Introduced in lesson 02.
    """

    def __init__(self, num_perm: int = 128, shingle: str = "word5", seed: int = 0,
                 chunk_bytes: int = 128_000):
        if num_perm < 1:
            raise ValueError(f"num_perm must be >= 1, got {num_perm}")
        self.num_perm = int(num_perm)
        self.shingle = shingle
        self.unit, self.n = parse_shingle_kind(shingle)
        self.seed = seed
        self.chunk_bytes = int(chunk_bytes)
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, 2**63, size=self.num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        self.b = rng.integers(0, 2**63, size=self.num_perm, dtype=np.uint64) * np.uint64(2)
        self.last_empty = np.zeros(0, dtype=bool)


    def _chunk_hashes(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if self.unit == "word":
            return word_shingle_hashes(texts, self.n)
        xs, docs = [], []
        for d, text in enumerate(texts):
            if not text:
                continue
            t = _fmix64(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
                        .astype(np.uint64) + np.uint64(0x632BE59BD9B4E019))
            n = min(self.n, len(t))
            xs.append(_ngram_hash(t, n, len(t) - n + 1))
            docs.append(np.full(len(xs[-1]), d, dtype=np.int64))
        if not xs:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        return np.concatenate(xs), np.concatenate(docs)

    def signatures(self, docs: Iterable[str], progress: bool = False) -> np.ndarray:
        """A ``(len(docs), num_perm)`` uint32 matrix of MinHash signatures."""
        docs = list(docs)
        out = np.full((len(docs), self.num_perm), _MAX_SIG, dtype=np.uint32)
        self.last_empty = np.ones(len(docs), dtype=bool)
        bounds, size = [0], 0
        for i, d in enumerate(docs):       # chunks of about chunk_bytes of text
            if not isinstance(d, str):
                raise TypeError(f"document {i} is {type(d).__name__}, not str: decode it first "
                                f"(e.g. data.decode('utf-8', 'replace')) or drop it with a counted reason")
            size += len(d)
            if size >= self.chunk_bytes:
                bounds.append(i + 1)
                size = 0
        if bounds[-1] != len(docs):
            bounds.append(len(docs))
        chunks = list(zip(bounds[:-1], bounds[1:]))
        if progress:
            from tqdm.auto import tqdm
            chunks = tqdm(chunks, desc="MinHash", unit="chunk")
        for lo, hi in chunks:
            x, doc = self._chunk_hashes(docs[lo:hi])
            if len(x) == 0:
                continue
            rows, starts = np.unique(doc, return_index=True)
            self.last_empty[lo + rows] = False
            out[lo + rows] = self._min_matrix(x, starts)
        return out

    def _min_matrix(self, x: np.ndarray, starts: np.ndarray, max_cells: int = 4_000_000) -> np.ndarray:
        """Column minima of h_k(x) per segment (segments begin at ``starts``): ``(len(starts), num_perm)``."""
        step = max(1, max_cells // self.num_perm)
        if len(x) <= step:
            h = np.multiply.outer(self.a, x)             # (num_perm, shingles), wraps mod 2**64
            h += self.b[:, None]
            high = h.view(np.uint32)[:, _HIGH_HALF::2]   # (a*x + b) >> 32 without a shift
            return np.minimum.reduceat(high, starts, axis=1).T
        # too many shingles for one matrix: split at segment starts (a long document is cut inside)
        ends = np.append(starts[1:], len(x))
        out = np.full((len(starts), self.num_perm), _MAX_SIG, dtype=np.uint32)
        for lo in range(0, len(x), step):
            hi = min(lo + step, len(x))
            segs = np.flatnonzero((starts < hi) & (ends > lo))
            local = np.maximum(starts[segs], lo) - lo
            part = self._min_matrix(x[lo:hi], local, max_cells)
            out[segs] = np.minimum(out[segs], part)
        return out

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

def _check_docs(docs: Any, where: str) -> list[str]:
    """``docs`` as a list of strings; TypeError for one string, bytes or a non-string element."""
    if isinstance(docs, (str, bytes, bytearray)):
        raise TypeError(f"{where} needs a sequence of documents (e.g. a list of str), got a single "
                        f"{type(docs).__name__}; wrap it: {where}([text, ...])")
    docs = list(docs)
    for i, d in enumerate(docs):
        if not isinstance(d, str):
            raise TypeError(f"{where}: document {i} is {type(d).__name__}, not str")
    return docs


def find_near_duplicates(docs: Sequence[str], threshold: float = 0.8, *, num_perm: int = 128,
                         shingle: str = "word5", bands: int | None = None, rows: int | None = None,
                         verify: str | None = "exact", fn_weight: float = 0.95,
                         seed: int = 0) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, sorted, judged near-duplicates at Jaccard >= ``threshold``.

    MinHash signatures (:class:`MinHasher`) -> LSH candidates (:func:`lsh_candidate_pairs`, banding from
    :func:`choose_bands` with false-negative weight ``fn_weight`` and false-positive weight
    ``1 - fn_weight`` unless ``bands``/``rows`` are given; the default leans to recall because the
    candidates are verified; 128 permutations at 0.8 give 16 bands x 8 rows) ->
    verification: ``"exact"`` keeps pairs whose exact shingle Jaccard reaches the threshold (precision
    1 against exact Jaccard; recall = the banding's), ``"estimate"`` uses signature agreement, ``None``
    keeps every candidate. Documents without shingles are never reported. ``docs`` must be a sequence
    of strings: a single ``str`` (or ``bytes``) raises ``TypeError`` (iterating it would treat each
    character as a document), as does a non-string element (its index is named). Introduced in lesson 02.
    """
    docs = _check_docs(docs, "find_near_duplicates")
    if verify not in ("exact", "estimate", None):
        raise ValueError(f"verify must be 'exact', 'estimate' or None, got {verify!r}")
    if bands is None or rows is None:
        bands, rows = choose_bands(threshold, num_perm, fp_weight=1.0 - fn_weight, fn_weight=fn_weight)
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


def plant_near_duplicates(docs: Sequence[str], n_plants: int, seed: int = 0,
                          max_edit_rate: float = 0.3) -> tuple[list[str], list[tuple[int, int]]]:
    """``docs`` plus ``n_plants`` edited copies of randomly chosen documents (each line replaced,
    deleted or followed by a new line with probability up to ``max_edit_rate``, drawn per copy), and
    the planted ``(source, copy)`` index pairs. The copies' exact Jaccard with their source spreads
    around typical thresholds, which makes a hard test set. Introduced in lesson 02."""
    import random

    rng = random.Random(seed)
    out = list(docs)
    planted = []
    candidates = [i for i, d in enumerate(docs) if d.strip()]
    if n_plants and not candidates:
        raise ValueError("plant_near_duplicates needs at least one non-empty document")
    for k in range(n_plants):
        src = rng.choice(candidates)
        rate = rng.uniform(0.0, max_edit_rate)
        lines = []
        for line in docs[src].splitlines():
            roll = rng.random()
            if roll < rate / 3:
                continue                                          # delete
            if roll < 2 * rate / 3:
                line = f"{line.split('=')[0].rstrip()} = edited_{k}_{rng.randrange(10**6)}"  # replace
            lines.append(line)
            if rng.random() < rate / 3:
                lines.append(f"# note {rng.randrange(10**6)}: planted edit {k}")          # insert
        planted.append((src, len(out)))
        out.append("\n".join(lines) + "\n")
    return out, planted


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
                fn_weight: float = 0.95, seed: int = 0) -> DedupResult:
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
                                       shingle=shingle, verify=verify, fn_weight=fn_weight, seed=seed)
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


def repo_level_duplicates(docs: Sequence[str], repos: Sequence[str], paths: Sequence[str], *,
                          threshold: float = 0.8, num_perm: int = 128, shingle: str = "word5",
                          seed: int = 0) -> dict[str, Any]:
    """Near dedup at the repository level, as DeepSeek-Coder does it: each repository's files are
    concatenated (in path order) into one document and those documents are deduplicated like files
    (:func:`find_near_duplicates`, exact verification), so a repository is kept or dropped *whole* and
    a kept one never loses files. Returns ``{"repos": [names], "pairs": [(repo_a, repo_b, jaccard)],
    "clusters": [[names]]}``. Introduced in lesson 02."""
    docs = _check_docs(docs, "repo_level_duplicates")
    by_repo: dict[str, list[tuple[str, str]]] = {}
    for d, r, p in zip(docs, repos, paths):
        by_repo.setdefault(r, []).append((p, d))
    names = sorted(by_repo)
    texts = ["\n".join(d for _, d in sorted(by_repo[r])) for r in names]
    pairs = find_near_duplicates(texts, threshold, num_perm=num_perm, shingle=shingle, seed=seed)
    sims = [(names[i], names[j], round(jaccard(shingles(texts[i], shingle), shingles(texts[j], shingle)), 4))
            for i, j in pairs]
    clusters = [[names[i] for i in c] for c in clusters_from_pairs(len(names), pairs)]
    return {"repos": names, "pairs": sims, "clusters": clusters}


def partially_removed_repos(removed: Sequence[Mapping[str, Any]], repos: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{repo: (files removed, files it had)}`` for the repositories that file-level dedup left
    incomplete (some, not all, of their files removed). Introduced in lesson 02."""
    total: dict[str, int] = {}
    for r in repos:
        total[r] = total.get(r, 0) + 1
    lost: dict[str, int] = {}
    for rec in removed:
        lost[rec["repo"]] = lost.get(rec["repo"], 0) + 1
    return {r: (k, total[r]) for r, k in sorted(lost.items()) if k < total.get(r, 0)}


# --- 7. the lesson's artefact -----------------------------------------------------------------------

def _corpus(profile: str, rebuild: bool = False):
    from course_lib.data.corpus import load_corpus

    return load_corpus(profile=profile, rebuild=rebuild)


def repo_stars(profile: str = "ci") -> dict[str, int] | None:
    """Stars per repository, from lesson 01 (``course_lib.data.corpus.corpus_repo_metadata``: the kept
    repositories; in ci the stars are the illustrative values of ``assets/repo_metadata.csv``), or None
    when lesson 01 offers none (the keep rule then falls back to the shortest path).
    Introduced in lesson 02."""
    try:
        from course_lib.data.corpus import corpus_repo_metadata

        meta = corpus_repo_metadata(profile)
    except (ImportError, AttributeError, OSError, ValueError, KeyError):
        try:
            from course_lib.data.repos import load_repo_metadata

            meta = load_repo_metadata()
        except (ImportError, OSError, ValueError) as exc:
            print(f"no star counts ({exc}); the keep rule falls back to the shortest path")
            return None
    return {name: int((m or {}).get("stars") or 0) for name, m in meta.items()}


def _stars_for(corpus, profile: str = "ci") -> Mapping[str, int] | Sequence[int] | None:
    """Stars per row when the corpus carries a ``stars`` column, else :func:`repo_stars`."""
    if "stars" in corpus.column_names:
        return list(corpus["stars"])
    return repo_stars(profile)


def corpus_fingerprint(corpus) -> str:
    """A content hash of a corpus (repo, path, content of every row, in order): the cache key part that
    changes when lesson 01's output changes. Introduced in lesson 02."""
    h = hashlib.sha256()
    for repo, path, text in zip(corpus["repo"], corpus["path"], corpus["content"]):
        for part in (repo, path, text):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
    return h.hexdigest()[:16]


def _dedup_artefact(profile: str, rebuild: bool = False):
    """The deduplicated corpus as an artefact of :mod:`course_lib.store`: keyed by the profile's
    ``dedup`` settings, the content of lesson 01's corpus (upstream) and this module's code."""
    from course_lib import store
    from course_lib.profiles import get_profile

    corpus = _corpus(profile)
    cfg = dict(get_profile(profile).dedup)

    def build(folder):
        stars = _stars_for(corpus, profile)
        result = deduplicate(corpus["content"], corpus["repo"], corpus["path"], stars=stars,
                             threshold=cfg["threshold"], num_perm=cfg["num_perm"], shingle=cfg["shingle"],
                             verify=cfg.get("verify", "exact"), fn_weight=cfg.get("fn_weight", 0.95))
        kept = corpus.select(result.keep)
        quality = near_dedup_quality(corpus["content"], result, cfg)
        report = {"profile": profile, "config": cfg, "input_files": len(corpus), **result.summary(),
                  "stars_known": stars is not None, "quality": quality,
                  "keep_rule": "most stars, then shortest path, then alphabetical (repo, path)",
                  "removed_files": result.removed,
                  "clusters": [[corpus["path"][i] for i in c] for c in result.clusters[:200]]}
        kept.save_to_disk(str(folder / "dataset"))
        (folder / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"dedup ({profile}): {len(corpus)} files -> kept {len(kept)}; removed "
              f"{report.get('exact_duplicate', 0)} exact and {report.get('near_duplicate', 0)} near duplicates")
        return {"rows": len(kept)}

    return store.get_or_build("dedup", profile, cfg, build, upstream=[corpus_fingerprint(corpus)],
                              code=[__file__], rebuild=rebuild, log=print)


def near_dedup_quality(docs: Sequence[str], result: DedupResult, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Precision and recall of ``result``'s near-duplicate pairs against the exact Jaccard ground truth
    (:func:`exact_jaccard_pairs`) among the files that survived exact dedup. Introduced in lesson 02."""
    import time

    exact_gone = {r["index"] for r in result.removed if r["reason"] == "exact_duplicate"}
    survivors = [i for i in range(len(docs)) if i not in exact_gone]
    t0 = time.process_time()
    truth = [(survivors[a], survivors[b])
             for a, b in exact_jaccard_pairs([docs[i] for i in survivors], cfg["threshold"], cfg["shingle"])]
    return {**precision_recall(result.near_pairs, truth), "truth_cpu_seconds": round(time.process_time() - t0, 1)}


def load_deduped_corpus(profile: str = "ci", rebuild: bool = False):
    """Lesson 01's corpus after exact and near dedup (a ``datasets.Dataset``, same columns), cached in
    ``cache_dir("dedup")`` through :mod:`course_lib.store` under a key of the profile's ``dedup``
    settings, lesson 01's corpus artefact and this module's code; built from
    ``course_lib.data.corpus.load_corpus`` when missing (or ``rebuild=True``). The report of what was removed
    is in :func:`load_dedup_report`. Introduced in lesson 02.
    """
    import datasets

    return datasets.load_from_disk(str(_dedup_artefact(profile, rebuild).path / "dataset"))


def load_dedup_report(profile: str = "ci") -> dict[str, Any]:
    """The report of :func:`load_deduped_corpus` (counts, config, one record per removed file, the
    first clusters), building the deduped corpus first when needed. Introduced in lesson 02."""
    return json.loads((_dedup_artefact(profile).path / "report.json").read_text(encoding="utf-8"))
