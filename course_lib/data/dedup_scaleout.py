"""Scale-out of lesson 02's near-dedup: the same four stages in datatrove, run for real.

datatrove (Hugging Face's data-processing library) implements MinHash dedup as four pipeline stages —
signatures -> buckets -> clusters -> filter — and runs them with a ``LocalPipelineExecutor`` (one
machine), a ``SlurmPipelineExecutor`` (a Slurm cluster: each stage an array job, ``depends=`` chains
them) or a ``RayPipelineExecutor`` (a Ray cluster). Only the executor changes; the stages stay.

datatrove cannot share the course's virtual environment: datatrove 0.10 needs numpy >= 2 and a newer
huggingface-hub, while the LLaMA-Factory stack of lessons 05/07 needs numpy < 2 and hub < 1. So it gets
its own small environment, ``.venv-datatrove`` beside the course (``$COURSE_DATATROVE_VENV`` overrides),
created on demand by :func:`ensure_datatrove_venv`; :func:`run_datatrove_minhash` writes the corpus as
JSONL, runs ``course_lib/scripts/datatrove_minhash.py`` there as a subprocess and reads back what
datatrove removed. Command line: ``python -m course_lib.data.dedup_scaleout setup|run|status``.

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

from course_lib.paths import side_venv, venv_python

DATATROVE_REQUIREMENTS = ["datatrove==0.10.1", "regex", "xxhash<4", "tokenizers", "orjson"]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "datatrove_minhash.py"


def datatrove_venv_path() -> Path:
    """Where the datatrove environment lives: ``$COURSE_DATATROVE_VENV``, else ``<repo>/.venv-datatrove``
    (else ``<course cache>/venv-datatrove`` when course_lib is installed without the repository).
    Introduced in lesson 02."""
    return side_venv("datatrove", "COURSE_DATATROVE_VENV")


def datatrove_status(venv: Path | None = None) -> dict[str, Any]:
    """``{"venv": path, "ready": bool, "version": str | None, "reason": str}`` without installing
    anything. Introduced in lesson 02."""
    venv = venv or datatrove_venv_path()
    py = venv_python(venv)
    if not py.exists():
        return {"venv": str(venv), "ready": False, "version": None,
                "reason": f"no datatrove environment at {venv}; create it with "
                          f"`python -m course_lib.data.dedup_scaleout setup` (pip install "
                          f"{' '.join(DATATROVE_REQUIREMENTS)} into a new venv, ~1-2 min, ~150 MB)"}
    probe = subprocess.run([str(py), "-c", "import datatrove, importlib.metadata as m; "
                            "print(m.version('datatrove'))"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return {"venv": str(venv), "ready": False, "version": None,
                "reason": f"{venv} exists but `import datatrove` fails: {probe.stderr.strip()[-300:]}; "
                          f"rebuild it with `python -m course_lib.data.dedup_scaleout setup --force`"}
    return {"venv": str(venv), "ready": True, "version": probe.stdout.strip(), "reason": "ready"}


def ensure_datatrove_venv(venv: Path | None = None, force: bool = False, quiet: bool = True) -> Path:
    """Create the datatrove environment when missing (``python -m venv`` + ``pip install`` of
    :data:`DATATROVE_REQUIREMENTS` from the package index); return its path. Raises ``RuntimeError``
    with pip's message when the install fails (e.g. no access to the package index).
    Introduced in lesson 02."""
    venv = venv or datatrove_venv_path()
    if not force and datatrove_status(venv)["ready"]:
        return venv
    if force and venv.exists():
        shutil.rmtree(venv)
    base = getattr(sys, "_base_executable", None) or sys.executable
    print(f"creating the datatrove environment at {venv} (separate from the course venv: datatrove "
          f"needs numpy>=2) ...", flush=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    cmd = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check",
           *(["-q"] if quiet else []), *DATATROVE_REQUIREMENTS]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install datatrove into {venv}:\n{done.stderr[-2000:]}\n"
                           f"Check access to the package index, then run "
                           f"`python -m course_lib.data.dedup_scaleout setup --force`.")
    status = datatrove_status(venv)
    if not status["ready"]:
        raise RuntimeError(status["reason"])
    print(f"datatrove {status['version']} ready in {venv}")
    return venv


def run_datatrove_minhash(docs: Sequence[str], work_dir: str | Path | None = None, *,
                          ids: Sequence[str] | None = None, tasks: int = 2, workers: int = 2,
                          buckets: int = 14, hashes_per_bucket: int = 8, ngrams: int = 5,
                          venv: Path | None = None, timeout_s: float = 900) -> dict[str, Any]:
    """Run datatrove's signatures -> buckets -> clusters -> filter on ``docs`` with its local executor
    (in the datatrove environment, as a subprocess) and return ``removed`` (indices into ``docs``),
    ``clusters`` (lists of indices), ``stage_seconds``, ``seconds`` and ``config``. The word tokenizer is
    bigcode's ``[A-Za-z_0-9]+`` (no spacy). Raises ``RuntimeError`` when the environment is missing
    (see :func:`datatrove_status`) or a stage fails (with the end of its log). Introduced in lesson 02."""
    venv = venv or datatrove_venv_path()
    status = datatrove_status(venv)
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
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
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


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m course_lib.data.dedup_scaleout",
                                description="datatrove's MinHash dedup in its own environment")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="create .venv-datatrove and install datatrove")
    s.add_argument("--force", action="store_true")
    sub.add_parser("status", help="say whether the datatrove environment is ready")
    r = sub.add_parser("run", help="run datatrove's four stages on the ci corpus and compare")
    r.add_argument("--profile", default="ci")
    args = p.parse_args(argv)
    if args.cmd == "setup":
        ensure_datatrove_venv(force=args.force, quiet=False)
        return 0
    if args.cmd == "status":
        print(json.dumps(datatrove_status(), indent=1))
        return 0
    from course_lib.data import dedup
    from course_lib.profiles import get_profile

    corpus = dedup._corpus(args.profile)
    docs = list(corpus["content"])
    result = run_datatrove_minhash(docs)
    cfg = get_profile(args.profile).dedup
    ours = dedup.deduplicate(docs, corpus["repo"], corpus["path"], stars=dedup._stars_for(corpus, args.profile),
                             threshold=cfg.threshold, num_perm=cfg.num_perm, shingle=cfg.shingle)
    ours_clusters = ours.clusters + ours.exact_groups
    cmp = compare_removals(ours_clusters, result["clusters"], [r["index"] for r in ours.removed],
                           result["removed"])
    print(json.dumps({"datatrove": {k: v for k, v in result.items() if k not in ("removed", "clusters")},
                      "comparison": {k: (v if isinstance(v, int) else len(v)) for k, v in cmp.items()}},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
