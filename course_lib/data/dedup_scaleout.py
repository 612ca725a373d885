"""Scale-out of lesson 02's near-dedup: the same four stages in datatrove, run for real.

datatrove (Hugging Face's data-processing library) implements MinHash dedup as four pipeline stages —
signatures -> buckets -> clusters -> filter — and runs them with a ``LocalPipelineExecutor`` (one
machine), a ``SlurmPipelineExecutor`` (a Slurm cluster: each stage an array job, ``depends=`` chains
them) or a ``RayPipelineExecutor`` (a Ray cluster). Only the executor changes; the stages stay.

datatrove cannot share the course's virtual environment: datatrove 0.10 needs numpy >= 2 and a newer
huggingface-hub, while the LLaMA-Factory stack of lessons 05/07 needs numpy < 2 and hub < 1. So it gets
its own small environment, ``.venv-datatrove`` beside the course, one of the course's side environments
(:mod:`course_lib.tooling.environments`, which ``./course setup`` builds); :func:`run_datatrove_minhash`
writes the corpus as JSONL, runs ``course_lib/data/scripts/datatrove_minhash.py`` there as a subprocess
and reads back what datatrove removed. Command line: ``python -m course_lib.data.dedup_scaleout run``
(``setup`` and ``status`` are those of ``python -m course_lib.tooling.environments ... datatrove``).

Introduced in lesson 02.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from course_lib.paths import venv_python
from course_lib.profiles import ProfileLike, resolve_profile
from course_lib.tooling import environments

SCRIPT = Path(__file__).resolve().parent / "scripts" / "datatrove_minhash.py"


def run_datatrove_minhash(docs: Sequence[str], work_dir: str | Path | None = None, *,
                          ids: Sequence[str] | None = None, tasks: int = 2, workers: int = 2,
                          buckets: int = 14, hashes_per_bucket: int = 8, ngrams: int = 5,
                          venv: Path | None = None, timeout_s: float = 900) -> dict[str, Any]:
    """Run datatrove's signatures -> buckets -> clusters -> filter on ``docs`` with its local executor
    (in the datatrove environment, as a subprocess) and return ``removed`` (indices into ``docs``),
    ``clusters`` (lists of indices), ``stage_seconds``, ``seconds`` and ``config``. The word tokenizer is
    bigcode's ``[A-Za-z_0-9]+`` (no spacy). Raises ``RuntimeError`` when the environment is missing
    (``environments.status("datatrove")``) or a stage fails (with the end of its log). Introduced in lesson 02."""
    venv = venv or environments.venv_path("datatrove")
    status = environments.status("datatrove", venv)
    if not status["ready"]:
        raise RuntimeError(status["reason"])
    from course_lib.paths import cache_dir

    work = Path(work_dir) if work_dir else cache_dir("datatrove") / f"run-{os.getpid()}-{int(time.time())}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "input").mkdir(parents=True)
    ids = [str(i) for i in range(len(docs))] if ids is None else [str(i) for i in ids]
    index_of = {doc_id: i for i, doc_id in enumerate(ids)}
    per_file = max(1, -(-len(docs) // tasks))
    for t in range(tasks):          # one input file per task, so the stages parallelise
        with open(work / "input" / f"part{t:03d}.jsonl", "w", encoding="utf-8") as fh:
            for i in range(t * per_file, min(len(docs), (t + 1) * per_file)):
                fh.write(json.dumps({"id": ids[i], "text": docs[i]}) + "\n")
    cmd = [str(venv_python(venv)), str(SCRIPT), str(work / "input"), str(work / "out"),
           "--tasks", str(tasks), "--workers", str(workers), "--buckets", str(buckets),
           "--hashes-per-bucket", str(hashes_per_bucket), "--ngrams", str(ngrams)]
    env = environments.clean_environ()
    env.setdefault("OMP_NUM_THREADS", "1")
    t0 = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    seconds = time.time() - t0
    if done.returncode != 0 or not (work / "out" / "result.json").exists():
        raise RuntimeError(f"datatrove's pipeline failed (exit {done.returncode}); log tail:\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")
    raw = json.loads((work / "out" / "result.json").read_text(encoding="utf-8"))
    return {"removed": sorted(index_of[r] for r in raw["removed_ids"]),
            "clusters": sorted(sorted(index_of[r] for r in c) for c in raw["clusters"]),
            "stage_seconds": raw["stage_seconds"], "seconds": round(seconds, 1),
            "config": raw["config"], "work_dir": str(work), "datatrove_version": status["version"]}


def compare_removals(ours_clusters: Sequence[Sequence[int]], theirs_clusters: Sequence[Sequence[int]],
                     ours_removed: Sequence[int], theirs_removed: Sequence[int]) -> dict[str, Any]:
    """How two dedup runs agree: files removed by both / only one, and files that sit in a duplicate
    cluster in both / only one (the keep rules differ, so membership is the fairer comparison).
    Introduced in lesson 02."""
    a_rm, b_rm = set(ours_removed), set(theirs_removed)
    a_mem = {i for c in ours_clusters for i in c}
    b_mem = {i for c in theirs_clusters for i in c}
    return {"removed_both": len(a_rm & b_rm), "removed_only_ours": sorted(a_rm - b_rm),
            "removed_only_theirs": sorted(b_rm - a_rm), "clustered_both": len(a_mem & b_mem),
            "clustered_only_ours": sorted(a_mem - b_mem), "clustered_only_theirs": sorted(b_mem - a_mem),
            "ours_removed": len(a_rm), "theirs_removed": len(b_rm)}


def compare_with_course(profile: ProfileLike = "ci") -> dict[str, Any]:
    """datatrove's four stages and lesson 02's pipeline on the profile's corpus, compared
    (:func:`compare_removals`). Introduced in lesson 02."""
    from course_lib.data import dedup
    from course_lib.data.corpus import load_corpus

    P = resolve_profile(profile)
    corpus = load_corpus(P)
    docs = list(corpus["content"])
    result = run_datatrove_minhash(docs)
    cfg = P.dedup
    ours = dedup.deduplicate(docs, corpus["repo"], corpus["path"], stars=dedup.corpus_stars(corpus, P),
                             threshold=cfg.threshold, num_perm=cfg.num_perm, shingle=cfg.shingle)
    cmp = compare_removals(ours.clusters + ours.exact_groups, result["clusters"],
                           [r["index"] for r in ours.removed], result["removed"])
    return {"datatrove": {k: v for k, v in result.items() if k not in ("removed", "clusters")},
            "comparison": {k: (v if isinstance(v, int) else len(v)) for k, v in cmp.items()}}


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.data.dedup_scaleout run [--profile ci|full] | setup [--force] | status``
    (``setup``/``status``: the datatrove side environment, :mod:`course_lib.tooling.environments`)."""
    import argparse

    from course_lib.profiles import get_profile

    p = argparse.ArgumentParser(prog="python -m course_lib.data.dedup_scaleout",
                                description="datatrove's MinHash dedup in its own environment")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="create .venv-datatrove (= python -m course_lib.tooling.environments setup datatrove)")
    s.add_argument("--force", action="store_true")
    sub.add_parser("status", help="say whether the datatrove environment is ready")
    r = sub.add_parser("run", help="run datatrove's four stages on the ci corpus and compare")
    r.add_argument("--profile", default="ci")
    args = p.parse_args(argv)
    if args.cmd == "setup":
        return environments.main(["setup", "datatrove"] + (["--force"] if args.force else []))
    if args.cmd == "status":
        return environments.main(["status", "datatrove"])
    print(json.dumps(compare_with_course(get_profile(args.profile)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
