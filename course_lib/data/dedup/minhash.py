"""Shingles, Jaccard similarity and MinHash signatures (lesson 02, steps 2-3 of near-dedup).

:func:`word_shingles` (bigcode's ``[^A-Za-z_0-9]`` word tokens, n-grams) and :func:`char_shingles` are
the sets whose :func:`jaccard` MinHash estimates; :class:`MinHasher` is a vectorised numpy MinHash (hash
every shingle once, then one matrix of ``(a*x + b) >> 32`` multiply-add-shift permutations and a
segmented ``min`` per document); :func:`textbook_minhash` is the formula the lesson starts from.

Introduced in lesson 02.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np

WORD_RE = re.compile(r"[A-Za-z_0-9]+")


_NGRAM_MULT = np.uint64(0x9E3779B97F4A7C15)   # golden-ratio constant: mixes the n-gram polynomial


_FMIX_1 = np.uint64(0xFF51AFD7ED558CCD)       # murmur3's 64-bit finaliser constants


_FMIX_2 = np.uint64(0xC4CEB9FE1A85EC53)


_MAX_SIG = np.uint32(0xFFFFFFFF)


# --- shingles and Jaccard -------------------------------------------------------------------------

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


def clike_shingles(text: str, n: int = 5) -> set[str]:
    """The set of n-grams of C-like tokens (:func:`course_lib.data.clike.clike_tokens`: identifiers,
    numbers, operators, string and character literals; comments dropped), tokens joined by a space;
    the same short-text rule as :func:`word_shingles`. Introduced in lesson 02."""
    from course_lib.data.clike import clike_tokens

    tokens = clike_tokens(text)
    if not tokens:
        return set()
    if len(tokens) < n:
        return {" ".join(tokens)}
    return {" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def parse_shingle_kind(kind: str) -> tuple[str, int]:
    """``"word5"`` -> ``("word", 5)``, ``"char7"`` -> ``("char", 7)``, ``"clike5"`` -> ``("clike", 5)``
    (C/C++ tokens). Introduced in lesson 02."""
    m = re.fullmatch(r"(word|char|clike)(\d+)", kind)
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"shingle kind {kind!r} not understood: use 'word<N>', 'char<N>' or 'clike<N>' "
                         f"(C/C++ tokens), e.g. 'word5'")
    return m.group(1), int(m.group(2))


def shingle_for_language(shingle: str, language: str = "python") -> str:
    """The shingle kind the dedup pipeline uses for ``language``: for ``"cpp"`` (C or C++) word shingles
    become C-like token shingles (``"word5"`` -> ``"clike5"``: operators and literals count, comments
    do not); character shingles and Python are unchanged. Introduced in lesson 02."""
    from course_lib.data.clike import normalize_language

    unit, n = parse_shingle_kind(shingle)
    if normalize_language(language) == "cpp" and unit == "word":
        return f"clike{n}"
    return shingle


def shingles(text: str, kind: str = "word5") -> set[str]:
    """Shingles of ``text`` named by ``kind`` (``"word5"``, ``"char5"``, ``"clike5"``, ...).
    Introduced in lesson 02."""
    unit, n = parse_shingle_kind(kind)
    if unit == "clike":
        return clike_shingles(text, n)
    return word_shingles(text, n) if unit == "word" else char_shingles(text, n)


def jaccard(a: set, b: set) -> float:
    """|A ∩ B| / |A ∪ B|; two empty sets have Jaccard 0 here (an empty file is nobody's near-duplicate:
    exact dedup handles empties). Introduced in lesson 02."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


# --- MinHash --------------------------------------------------------------------------------------

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


def fmix64(x: np.ndarray) -> np.ndarray:
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
    return fmix64(g) >> np.uint64(32)


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
    tok_doc = np.searchsorted(doc_end, start, side="right")
    return _span_shingle_hashes(buf, start, end, tok_doc, len(texts), n)


def clike_shingle_hashes(texts: Sequence[str], n: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """:func:`word_shingle_hashes` for C/C++: the tokens are :func:`course_lib.data.clike.clike_tokens`
    (identifiers, numbers, operators, literals; comments dropped), hashed and n-grammed the same way.
    Introduced in lesson 02."""
    from course_lib.data.clike import clike_tokens

    pieces: list[bytes] = []
    doc_of: list[int] = []
    for d, text in enumerate(texts):
        toks = [t.encode("utf-8", "surrogatepass") for t in clike_tokens(text)]
        pieces.extend(toks)
        doc_of.extend([d] * len(toks))
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    end = np.cumsum(lengths)
    start = end - lengths
    buf = np.frombuffer(b"".join(pieces) + b"\0", dtype=np.uint8)
    return _span_shingle_hashes(buf, start, end, np.array(doc_of, dtype=np.int64), len(texts), n)


def _span_shingle_hashes(buf: np.ndarray, start: np.ndarray, end: np.ndarray, tok_doc: np.ndarray,
                         n_texts: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes from token byte spans ``buf[start:end]`` (token ``i`` belongs to text
    ``tok_doc[i]``, sorted by text): the common part of the word and C-like shingle hashers."""
    if len(start) == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    powers, inv_powers = _powers(len(buf))
    prefix = np.zeros(len(buf) + 1, dtype=np.uint64)
    np.cumsum(buf.astype(np.uint64) * powers[:len(buf)], out=prefix[1:])
    tok = (prefix[end] - prefix[start]) * inv_powers[start] + (end - start).astype(np.uint64)
    tok = fmix64(tok)
    counts = np.bincount(tok_doc, minlength=n_texts)
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
        if self.unit == "clike":
            return clike_shingle_hashes(texts, self.n)
        xs, docs = [], []
        for d, text in enumerate(texts):
            if not text:
                continue
            t = fmix64(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
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
