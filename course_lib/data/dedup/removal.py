"""What dedup removes: exact duplicates, clusters of near-duplicates and the copy each keeps (lesson 02).

Exact dedup (:func:`content_hash` of whitespace-normalised content, :func:`exact_duplicate_groups`), then
near-duplicate clusters (:class:`UnionFind`, :func:`clusters_from_pairs`) and the keep rule
(:func:`choose_keeper`), put together by :func:`deduplicate`; repository-level dedup; and the lesson's
artefact, the deduplicated course corpus: :func:`load_deduped_corpus` (cached) and :func:`load_dedup_report`.

Introduced in lesson 02.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from course_lib.data.corpus import quiet_datasets
from course_lib.data.dedup.lsh import check_docs, exact_jaccard_pairs, find_near_duplicates, precision_recall
from course_lib.data.dedup.minhash import jaccard, shingle_for_language, shingles
from course_lib.profiles import ProfileLike, resolve_profile

# --- exact dedup ----------------------------------------------------------------------------------

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


# --- clusters and the keep rule -------------------------------------------------------------------

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
                fn_weight: float = 0.95, seed: int = 0, language: str = "python") -> DedupResult:
    """Exact dedup, then near dedup of the survivors, one keeper per cluster (:func:`choose_keeper`).

    Every removed file gets a record: its index, repo, path, ``reason`` (``exact_duplicate`` or
    ``near_duplicate``), the index/repo/path it duplicates (the cluster's keeper) and, for near
    duplicates, the exact Jaccard with that keeper. ``language="cpp"`` compares C/C++ token shingles
    (``word5`` -> ``clike5``, comments dropped). Introduced in lesson 02.
    """
    shingle = shingle_for_language(shingle, language)
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
    docs = check_docs(docs, "repo_level_duplicates")
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


# --- the lesson's artefact ------------------------------------------------------------------------

def _corpus(profile: ProfileLike, rebuild: bool = False, language: str = "python"):
    from course_lib.data.corpus import load_corpus

    if language == "python":
        return load_corpus(profile=profile, rebuild=rebuild)
    return load_corpus(profile=profile, rebuild=rebuild, language=language)


def repo_stars(profile: ProfileLike = "ci") -> dict[str, int] | None:
    """Stars per repository, from lesson 01 (``course_lib.data.corpus.corpus_repo_metadata``: the kept
    repositories; in ci the stars are the illustrative values of ``assets/repo_metadata.csv``), or None
    when lesson 01 offers none (the keep rule then falls back to the shortest path).
    Introduced in lesson 02."""
    P = resolve_profile(profile)
    try:
        from course_lib.data.corpus import corpus_repo_metadata

        meta = corpus_repo_metadata(P)
    except (ImportError, AttributeError, OSError, ValueError, KeyError):
        try:
            from course_lib.data.repos import load_repo_metadata

            meta = load_repo_metadata()
        except (ImportError, OSError, ValueError) as exc:
            print(f"no star counts ({exc}); the keep rule falls back to the shortest path")
            return None
    return {name: int((m or {}).get("stars") or 0) for name, m in meta.items()}


def corpus_stars(corpus, profile: ProfileLike = "ci") -> Mapping[str, int] | Sequence[int] | None:
    """Stars per row when the corpus carries a ``stars`` column, else :func:`repo_stars` (what the keep
    rule of :func:`deduplicate` takes). Introduced in lesson 02."""
    P = resolve_profile(profile)
    if "stars" in corpus.column_names:
        return list(corpus["stars"])
    return repo_stars(P)


def corpus_fingerprint(corpus) -> str:
    """A content hash of a corpus (repo, path, content of every row, in order): the cache key part that
    changes when lesson 01's output changes. Introduced in lesson 02."""
    h = hashlib.sha256()
    for repo, path, text in zip(corpus["repo"], corpus["path"], corpus["content"]):
        for part in (repo, path, text):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
    return h.hexdigest()[:16]


def dedup_artefact(profile: ProfileLike, rebuild: bool = False, language: str = "python"):
    """The deduplicated corpus as an artefact of :mod:`course_lib.store`: keyed by the profile's
    ``dedup`` settings, the content of lesson 01's corpus (upstream) and the code of the dedup package.
    ``language="cpp"``: the C/C++ corpus with C-like token shingles (``word5`` -> ``clike5``) and no
    star counts (the keep rule falls back to the shortest path)."""
    from course_lib import store
    from course_lib.data.clike import normalize_language

    P = resolve_profile(profile)
    language = normalize_language(language)
    corpus = _corpus(P) if language == "python" else _corpus(P, language=language)
    cfg = dict(P.dedup)
    if language != "python":
        cfg["shingle"] = shingle_for_language(cfg["shingle"], language)
        cfg["language"] = language

    def build(folder):
        stars = corpus_stars(corpus, P) if language == "python" else None
        result = deduplicate(corpus["content"], corpus["repo"], corpus["path"], stars=stars,
                             threshold=cfg["threshold"], num_perm=cfg["num_perm"], shingle=cfg["shingle"],
                             verify=cfg.get("verify", "exact"), fn_weight=cfg.get("fn_weight", 0.95))
        kept = corpus.select(result.keep)
        quality = near_dedup_quality(corpus["content"], result, cfg)
        report = {"profile": P.name, "language": language, "config": cfg, "input_files": len(corpus), **result.summary(),
                  "stars_known": stars is not None, "quality": quality,
                  "keep_rule": "most stars, then shortest path, then alphabetical (repo, path)",
                  "removed_files": result.removed,
                  "clusters": [[corpus["path"][i] for i in c] for c in result.clusters[:200]]}
        with quiet_datasets():
            kept.save_to_disk(str(folder / "dataset"))
        (folder / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"dedup ({P.name}, {language}): {len(corpus)} files -> kept {len(kept)}; removed "
              f"{report.get('exact_duplicate', 0)} exact and {report.get('near_duplicate', 0)} near duplicates")
        return {"rows": len(kept)}

    name = P.name if language == "python" else f"{P.name}-{language}"
    return store.get_or_build("dedup", name, cfg, build, upstream=[corpus_fingerprint(corpus)],
                              code=sorted(Path(__file__).parent.glob("*.py")) + _lexer(language), rebuild=rebuild,
                              log=print)


def _lexer(language: str) -> list[Path]:
    """The C/C++ lexer's source when C-like tokens are shingled (a cache key part)."""
    return [Path(__file__).parent.parent / "clike.py"] if language != "python" else []


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


def load_deduped_corpus(profile: ProfileLike = "ci", rebuild: bool = False, language: str = "python"):
    """Lesson 01's corpus after exact and near dedup (a ``datasets.Dataset``, same columns), cached in
    ``cache_dir("dedup")`` through :mod:`course_lib.store` under a key of the profile's ``dedup``
    settings, lesson 01's corpus artefact and this module's code; built from
    ``course_lib.data.corpus.load_corpus`` when missing (or ``rebuild=True``). The report of what was removed
    is in :func:`load_dedup_report`. ``language="cpp"``: the C/C++ corpus of
    ``load_corpus(profile, language="cpp")`` deduplicated on C-like tokens. Introduced in lesson 02.
    """
    import datasets

    P = resolve_profile(profile)
    return datasets.load_from_disk(str(dedup_artefact(P, rebuild, language).path / "dataset"))


def load_dedup_report(profile: ProfileLike = "ci", language: str = "python") -> dict[str, Any]:
    """The report of :func:`load_deduped_corpus` (counts, config, one record per removed file, the
    first clusters), building the deduped corpus first when needed. Introduced in lesson 02."""
    P = resolve_profile(profile)
    return json.loads((dedup_artefact(P, language=language).path / "report.json").read_text(encoding="utf-8"))
