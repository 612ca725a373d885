"""LSH banding and verification: from MinHash signatures to near-duplicate pairs (lesson 02, steps 4-5).

:func:`s_curve` and :func:`choose_bands` pick the bands; :func:`lsh_candidate_pairs` buckets the
signatures; :func:`find_near_duplicates` verifies the candidates (estimated or exact Jaccard). The
ground truth that precision and recall are measured against is :func:`exact_jaccard_pairs`, an exact
similarity join with prefix filtering; :func:`plant_near_duplicates` makes a labelled test set.

Introduced in lesson 02.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from course_lib.data.dedup.minhash import MinHasher, estimated_jaccard, fmix64, jaccard, shingle_for_language, shingles

# --- LSH banding ----------------------------------------------------------------------------------

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
            key = fmix64(key ^ sig[:, col])
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


# --- verification, and the ground truth -----------------------------------------------------------

def check_docs(docs: Any, where: str) -> list[str]:
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
                         seed: int = 0, language: str = "python") -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, sorted, judged near-duplicates at Jaccard >= ``threshold``.

    MinHash signatures (:class:`MinHasher`) -> LSH candidates (:func:`lsh_candidate_pairs`, banding from
    :func:`choose_bands` with false-negative weight ``fn_weight`` and false-positive weight
    ``1 - fn_weight`` unless ``bands``/``rows`` are given; the default leans to recall because the
    candidates are verified; 128 permutations at 0.8 give 16 bands x 8 rows) ->
    verification: ``"exact"`` keeps pairs whose exact shingle Jaccard reaches the threshold (precision
    1 against exact Jaccard; recall = the banding's), ``"estimate"`` uses signature agreement, ``None``
    keeps every candidate. Documents without shingles are never reported. ``docs`` must be a sequence
    of strings: a single ``str`` (or ``bytes``) raises ``TypeError`` (iterating it would treat each
    character as a document), as does a non-string element (its index is named). ``language="cpp"``
    shingles C/C++ tokens instead of words (:func:`shingle_for_language`: ``word5`` -> ``clike5``).
    Introduced in lesson 02.
    """
    docs = check_docs(docs, "find_near_duplicates")
    shingle = shingle_for_language(shingle, language)
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
