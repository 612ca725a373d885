"""Deduplication of a code corpus (lesson 02): exact hashes, shingles, MinHash, LSH banding, clusters, keep rule.

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

The modules: :mod:`~course_lib.data.dedup.minhash` (steps 2-3), :mod:`~course_lib.data.dedup.lsh` (steps
4-5, and the ground truth), :mod:`~course_lib.data.dedup.removal` (steps 1, 6-7). Their public names are
all here, so ``from course_lib.data import dedup`` then ``dedup.MinHasher`` reads as in the lesson.
"""
from course_lib.data.dedup.lsh import (
    banding_errors,
    choose_bands,
    exact_jaccard_pairs,
    find_near_duplicates,
    lsh_candidate_pairs,
    plant_near_duplicates,
    precision_recall,
    s_curve,
    verify_pairs,
)
from course_lib.data.dedup.minhash import (
    MERSENNE_61,
    WORD_RE,
    MinHasher,
    char_shingles,
    clike_shingle_hashes,
    clike_shingles,
    estimated_jaccard,
    jaccard,
    minhash_params,
    parse_shingle_kind,
    shingle_for_language,
    shingles,
    textbook_minhash,
    word_shingle_hashes,
    word_shingles,
    word_tokens,
)
from course_lib.data.dedup.removal import (
    DedupResult,
    UnionFind,
    choose_keeper,
    clusters_from_pairs,
    content_hash,
    corpus_fingerprint,
    corpus_stars,
    dedup_artefact,
    deduplicate,
    exact_duplicate_groups,
    keeper_key,
    load_dedup_report,
    load_deduped_corpus,
    near_dedup_quality,
    normalize_whitespace,
    partially_removed_repos,
    repo_level_duplicates,
    repo_stars,
)

__all__ = [
    "DedupResult", "MERSENNE_61", "MinHasher", "UnionFind", "WORD_RE", "banding_errors", "char_shingles",
    "clike_shingle_hashes", "clike_shingles", "shingle_for_language",
    "choose_bands", "choose_keeper", "clusters_from_pairs", "content_hash", "corpus_fingerprint", "corpus_stars", "dedup_artefact",
    "deduplicate", "estimated_jaccard", "exact_duplicate_groups", "exact_jaccard_pairs",
    "find_near_duplicates", "jaccard", "keeper_key", "load_dedup_report", "load_deduped_corpus",
    "lsh_candidate_pairs", "minhash_params", "near_dedup_quality", "normalize_whitespace",
    "parse_shingle_kind", "partially_removed_repos", "plant_near_duplicates", "precision_recall",
    "repo_level_duplicates", "repo_stars", "s_curve", "shingles", "textbook_minhash", "verify_pairs",
    "word_shingle_hashes", "word_shingles", "word_tokens",
]
