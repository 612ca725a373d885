"""datatrove's four MinHash stages on a JSONL corpus (lesson 02's scale-out section).

Runs INSIDE the separate datatrove virtual environment (``course_lib.data.dedup_scaleout`` creates it and
starts this file as a subprocess): it imports nothing from course_lib. Usage::

    .venv-datatrove/bin/python datatrove_minhash.py INPUT_DIR WORK_DIR [--tasks N] [--workers N]
        [--buckets 14] [--hashes-per-bucket 8] [--ngrams 5]

Writes WORK_DIR/result.json: the ids datatrove removed, its clusters, and the stage timings.
"""
import argparse
import json
import re
import struct
import time
from pathlib import Path

WORD = re.compile(r"[A-Za-z_0-9]+")


def make_tokenizer():
    from datatrove.utils.word_tokenizers import WordTokenizer

    class CodeWordTokenizer(WordTokenizer):
        """bigcode's word tokens ([A-Za-z_0-9] runs): no spacy, no language model."""

        def word_tokenize(self, text):
            return WORD.findall(text)

        def sent_tokenize(self, text):
            return [text]

        def span_tokenize(self, text):
            return [(0, len(text))]

    return CodeWordTokenizer("code")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("input_dir")
    p.add_argument("work_dir")
    p.add_argument("--tasks", type=int, default=2, help="must equal the number of input files")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--buckets", type=int, default=14)
    p.add_argument("--hashes-per-bucket", type=int, default=8)
    p.add_argument("--ngrams", type=int, default=5)
    args = p.parse_args()

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.text import TextNormConfig

    work = Path(args.work_dir)
    config = MinhashConfig(
        n_grams=args.ngrams, num_buckets=args.buckets, hashes_per_bucket=args.hashes_per_bucket,
        hash_config=HashConfig(precision=64),
        # code: keep case, numbers and punctuation-free tokens as the tokenizer gives them
        norm_config=TextNormConfig(lowercase=False, norm_numbers=False, norm_unicode_diacritics=False,
                                   remove_punctuation=False),
    )
    tok = make_tokenizer()
    reader = lambda: JsonlReader(args.input_dir)  # noqa: E731
    stages = [
        LocalPipelineExecutor(
            pipeline=[reader(), MinhashDedupSignature(output_folder=str(work / "signatures"), config=config,
                                                      language=tok)],
            tasks=args.tasks, workers=args.workers, logging_dir=str(work / "logs/1_signatures")),
        LocalPipelineExecutor(
            pipeline=[MinhashDedupBuckets(input_folder=str(work / "signatures"),
                                          output_folder=str(work / "buckets"), config=config)],
            tasks=config.num_buckets, workers=args.workers, logging_dir=str(work / "logs/2_buckets")),
        LocalPipelineExecutor(
            pipeline=[MinhashDedupCluster(input_folder=str(work / "buckets"),
                                          output_folder=str(work / "remove_ids"), config=config,
                                          save_cluster_id=True)],
            tasks=1, logging_dir=str(work / "logs/3_clusters")),
        LocalPipelineExecutor(
            pipeline=[reader(),
                      MinhashDedupFilter(input_folder=str(work / "remove_ids"), load_cluster_ids=True,
                                         exclusion_writer=JsonlWriter(str(work / "removed"))),
                      JsonlWriter(str(work / "kept"))],
            tasks=args.tasks, workers=args.workers, logging_dir=str(work / "logs/4_filter")),
    ]
    timings = []
    for stage in stages:
        t0 = time.time()
        stage.run()
        timings.append(round(time.time() - t0, 2))

    def read_jsonl(folder):
        import gzip
        rows = []
        for f in sorted(Path(folder).glob("*")):
            opener = gzip.open if f.suffix == ".gz" else open
            with opener(f, "rt", encoding="utf-8") as fh:
                rows += [json.loads(line) for line in fh if line.strip()]
        return rows

    removed = read_jsonl(work / "removed") if (work / "removed").exists() else []
    kept = read_jsonl(work / "kept")
    # Cluster membership straight from stage 3's `.clusters` files ((doc index, cluster id) per rank):
    # stage 4 only labels documents of ranks that also have a `.remove` file, so its metadata misses
    # the kept member of a cluster whose copies all sit in another shard. One input file per task, so
    # rank r read the r-th input file (sorted) and doc index i is its i-th line.
    inputs = sorted(Path(args.input_dir).glob("*.jsonl"))
    ids_by_rank = [[json.loads(line)["id"] for line in f.open(encoding="utf-8") if line.strip()]
                   for f in inputs]
    clusters = {}
    for rank, ids in enumerate(ids_by_rank):
        path = work / "remove_ids" / f"{rank:06d}.clusters"
        if not path.exists():
            continue
        raw = path.read_bytes()
        for doc, cid in struct.iter_unpack("<2I", raw):
            clusters.setdefault(str(cid), []).append(ids[doc])
    result = {"removed_ids": sorted(r["id"] for r in removed), "kept": len(kept),
              "clusters": sorted(sorted(v) for v in clusters.values() if len(v) > 1),
              "stage_seconds": timings,
              "config": {"n_grams": config.n_grams, "num_buckets": config.num_buckets,
                         "hashes_per_bucket": config.hashes_per_bucket}}
    (work / "result.json").write_text(json.dumps(result), encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k not in ("removed_ids", "clusters")}))


if __name__ == "__main__":   # the local executor starts workers with forkserver: this guard is required
    main()
