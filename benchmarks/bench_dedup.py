"""Benchmark of lesson 02's near-dedup: course_lib's MinHash/LSH against datasketch, in one run.

Prints, on N synthetic ~2 KB code files with planted near-duplicates (default 20,000, 10 % planted)
and on the real corpus of lesson 01:

* MinHash signatures per CPU-second, course_lib vs datasketch (same num_perm, same word 5-grams;
  datasketch measured on a subset and scaled), and their ratio (target >= 5x);
* precision / recall of near-duplicate pairs at Jaccard >= 0.8 against the exact Jaccard ground truth
  (course_lib's exact similarity join): course_lib (recall-leaning banding + exact verification),
  course_lib with estimated verification, and datasketch's MinHashLSH with its default banding
  (target >= 0.95 both for course_lib);
* peak memory (tracemalloc) per 10,000 documents of signatures + LSH.

Usage::

    PYTHONPATH=$PWD python benchmarks/bench_dedup.py            # 20,000 docs (minutes)
    PYTHONPATH=$PWD python benchmarks/bench_dedup.py --small    # 2,000 docs (about a minute)
    ... --no-real  (skip the real corpus)   --json out.json  (write the numbers)
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
import tracemalloc

import numpy as np

from course_lib.data import dedup

THRESHOLD = 0.8
NUM_PERM = 128


# --- synthetic code files ---------------------------------------------------------------------------

def _vocabulary(rng: random.Random, size: int) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "zu", "pe", "da", "gi", "ho", "ju",
                 "bar", "foo", "data", "item", "node", "val", "idx", "buf", "cfg", "req", "res"]
    words = set()
    while len(words) < size:
        words.add("_".join(rng.choice(syllables) + rng.choice(syllables) for _ in range(rng.randint(1, 2))))
    return sorted(words)


def synthetic_code_file(rng: random.Random, vocab: list[str], target_bytes: int = 2000) -> str:
    """A random but Python-shaped file of about ``target_bytes`` bytes."""
    w = lambda: rng.choice(vocab)  # noqa: E731
    lines = [f"import {w()}", f"from {w()} import {w()}, {w()}", ""]
    size = sum(len(l) + 1 for l in lines)
    while size < target_bytes:
        body = [f"def {w()}({w()}, {w()}={rng.randint(0, 99)}):",
                f'    """{w().capitalize()} the {w()} of {w()}."""']
        for _ in range(rng.randint(3, 9)):
            kind = rng.random()
            if kind < 0.3:
                body.append(f"    {w()} = {w()}.{w()}({w()}, {rng.randint(0, 999)})")
            elif kind < 0.5:
                body += [f"    for {w()} in range({rng.randint(1, 50)}):", f"        {w()}.append({w()})"]
            elif kind < 0.7:
                body += [f"    if {w()} > {rng.randint(0, 9)}:", f"        return {w()}"]
            else:
                body.append(f"    {w()} += {w()} * {rng.randint(1, 9)}")
        body += [f"    return {w()}", "", ""]
        lines += body
        size += sum(len(l) + 1 for l in body)
    return "\n".join(lines)


def synthetic_corpus(n_docs: int, dup_fraction: float = 0.1, seed: int = 0) -> tuple[list[str], list]:
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 4000)
    n_plants = int(n_docs * dup_fraction)
    originals = [synthetic_code_file(rng, vocab) for _ in range(n_docs - n_plants)]
    docs, planted = dedup.plant_near_duplicates(originals, n_plants, seed=seed, max_edit_rate=0.3)
    return docs, planted


# --- measurements -----------------------------------------------------------------------------------

def course_signatures_rate(docs: list[str]) -> tuple[float, np.ndarray, dedup.MinHasher]:
    hasher = dedup.MinHasher(num_perm=NUM_PERM, shingle="word5")
    hasher.signatures(docs[:200])                      # warm-up (numpy buffers, power tables)
    t0 = time.process_time()
    sig = hasher.signatures(docs)
    dt = time.process_time() - t0
    return len(docs) / dt, sig, hasher


def datasketch_minhashes(docs: list[str]):
    from datasketch import MinHash

    out = []
    t0 = time.process_time()
    for d in docs:
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch([s.encode("utf-8") for s in dedup.word_shingles(d)])
        out.append(m)
    return out, time.process_time() - t0


def datasketch_lsh_pairs(minhashes, docs) -> list[tuple[int, int]]:
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)   # default weights 0.5/0.5 -> (9, 13)
    pairs = set()
    for i, m in enumerate(minhashes):
        if not dedup.word_shingles(docs[i]):
            continue
        for j in lsh.query(m):
            pairs.add((min(i, j), max(i, j)))
        lsh.insert(i, m)
    return sorted(pairs)


def peak_memory_per_10k(docs: list[str]) -> float:
    """Peak traced MiB while signing and banding ``docs``, scaled to 10,000 documents."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    hasher = dedup.MinHasher(num_perm=NUM_PERM)
    sig = hasher.signatures(docs)
    b, r = dedup.choose_bands(THRESHOLD, NUM_PERM, 0.05, 0.95)
    dedup.lsh_candidate_pairs(sig, b, r, skip=hasher.last_empty)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, peak / 2**20 * 10_000 / len(docs)


def evaluate(name: str, docs: list[str], ds_subset: int) -> dict:
    print(f"\n== {name}: {len(docs)} documents, mean {np.mean([len(d) for d in docs]):.0f} chars ==")
    rate, sig, hasher = course_signatures_rate(docs)
    sub = docs[:ds_subset]
    ds_all = len(sub) == len(docs)
    minhashes, ds_time = datasketch_minhashes(sub if not ds_all else docs)
    ds_rate = len(minhashes) / ds_time
    print(f"signatures/CPU-s  course_lib {rate:9.0f}   datasketch {ds_rate:7.0f} "
          f"(on {len(minhashes)} docs)   ratio {rate / ds_rate:5.1f}x")
    t0 = time.process_time()
    truth = dedup.exact_jaccard_pairs(docs, THRESHOLD)
    t_truth = time.process_time() - t0
    print(f"exact Jaccard >= {THRESHOLD}: {len(truth)} pairs ({t_truth:.1f} CPU-s, prefix-filtered join)")
    results = {"docs": len(docs), "course_rate": rate, "datasketch_rate": ds_rate,
               "speed_ratio": rate / ds_rate, "truth_pairs": len(truth)}
    rows = []
    b, r = dedup.choose_bands(THRESHOLD, NUM_PERM, 0.05, 0.95)
    cand = dedup.lsh_candidate_pairs(sig, b, r, skip=hasher.last_empty)
    for label, verify in ((f"course_lib {b}x{r} + exact verify", "exact"),
                          (f"course_lib {b}x{r} + estimated verify", "estimate"),
                          (f"course_lib {b}x{r} candidates only", None)):
        t0 = time.process_time()
        found = dedup.verify_pairs(docs, cand, THRESHOLD, verify=verify, signatures=sig)
        pr = dedup.precision_recall(found, truth)
        rows.append((label, pr, time.process_time() - t0))
    b9, r9 = dedup.choose_bands(THRESHOLD, NUM_PERM)
    cand9 = dedup.lsh_candidate_pairs(sig, b9, r9, skip=hasher.last_empty)
    rows.append((f"course_lib {b9}x{r9} (datasketch's banding), no verify",
                 dedup.precision_recall(cand9.tolist(), truth), 0.0))
    if ds_all:
        t0 = time.process_time()
        ds_pairs = datasketch_lsh_pairs(minhashes, docs)
        rows.append(("datasketch MinHashLSH default (9x13)", dedup.precision_recall(ds_pairs, truth),
                     time.process_time() - t0))
    print(f"{'method':<50} {'precision':>9} {'recall':>7} {'found':>7} {'CPU-s':>7}")
    for label, pr, dt in rows:
        print(f"{label:<50} {pr['precision']:9.3f} {pr['recall']:7.3f} {pr['found']:7d} {dt:7.1f}")
        results[label] = {"precision": pr["precision"], "recall": pr["recall"]}
    peak, mem = peak_memory_per_10k(docs)
    print(f"peak memory (signatures + LSH, tracemalloc): {peak:.1f} MiB for {len(docs)} documents = "
          f"{mem:.1f} MiB per 10k documents (includes a fixed ~30 MiB chunk buffer; the signature "
          f"matrix alone is {NUM_PERM * 4 * 10_000 / 2**20:.1f} MiB per 10k)")
    results["peak_mib"] = peak
    results["peak_mib_per_10k"] = mem
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--small", action="store_true", help="2,000 synthetic documents instead of 20,000")
    p.add_argument("--docs", type=int, default=None, help="number of synthetic documents")
    p.add_argument("--datasketch-docs", type=int, default=None,
                   help="documents datasketch signs (all of them by default; fewer skips its P/R)")
    p.add_argument("--no-real", action="store_true", help="skip the real corpus")
    p.add_argument("--profile", default="ci")
    p.add_argument("--json", default=None, help="write the numbers to this file")
    args = p.parse_args(argv)
    n = args.docs or (2000 if args.small else 20_000)
    docs, planted = synthetic_corpus(n, 0.1, seed=0)
    out = {"synthetic": evaluate(f"synthetic code, {len(planted)} planted near-duplicates", docs,
                                 args.datasketch_docs or n)}
    if not args.no_real:
        from course_lib.data.corpus import load_corpus
        corpus = load_corpus(profile=args.profile)
        real = list(corpus["content"])
        if args.small:
            real = real[:800]
        out["real"] = evaluate(f"real corpus ({args.profile})", real, args.datasketch_docs or len(real))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
