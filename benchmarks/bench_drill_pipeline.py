"""Benchmark of lesson 07's thesis: does SFT on the pipeline's data beat SFT on the raw (noisy) data?

Runs the ci drill (download → LazyLLM pipeline → raw SFT and pipeline SFT through LazyLLM →
LLaMA-Factory → inference → sandboxed evaluation) once per seed, each in its own folder, and prints per
variant the hidden-test pass@1 on the two eval parts (new instances of trained task families, held-out
combinations; the answer starts with the function's signature, HumanEval's protocol), the hidden tests on
the free answer, Pass@1 and PPL: the mean, the spread (min–max) over seeds, and whether the pipeline's
lead on new instances is larger than the seed-to-seed spread. The seed changes the train/eval split
and the SFT seed; the base model (lesson 04's tiny model) is the same.

Usage::

    PYTHONPATH=$PWD python benchmarks/bench_drill_pipeline.py                 # seeds 0 1 2, ci sizes
    PYTHONPATH=$PWD python benchmarks/bench_drill_pipeline.py --seeds 0 1 2 --json benchmarks/results/bench_drill_pipeline.json
    (the saved results, with the date, the SFT settings and the per-seed seconds: lesson 07 prints them)
    ... --root DIR   (where each seed's drill folder goes; default: the course cache)

Each seed costs one ci drill (the README's lesson table gives its time on 2 cores); a rerun with the
same settings is read back from the cache, so for times from a clean cache delete ``--root`` first.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from course_lib import drill
from course_lib.drill import scoreboard
from course_lib.drill.outputs import DrillPaths, setup_logging
from course_lib.drill.settings import default_root
from course_lib.training import sft

KEYS = ("test pass@1 (new instances)", "test pass@1 (held-out combinations)", "test pass@1 (free answer)",
        "names the function", "Pass@1", "FCR", "PPL")
VARIANTS = ("base", "raw_sft", "pipeline_sft")


def run_seed(seed: int, root: Path) -> dict:
    cfg = drill.config_from_profile("ci", seed=seed, compare_raw=True, paths=DrillPaths.under(root / f"seed{seed}"))
    cfg.sft_overrides = {**cfg.sft_overrides, "seed": seed}
    cfg.paths.make()
    setup_logging(cfg.paths.log_dir, quiet=True)
    t0 = time.monotonic()
    drill.run_drill(cfg)
    seconds = round(time.monotonic() - t0, 1)
    m = drill.load_metrics(cfg)
    manifest = json.loads((cfg.paths.output_dir / "run_manifest.json").read_text(encoding="utf-8"))
    return {"seed": seed, "seconds": seconds,
            "step_seconds": {k: s.get("seconds") for k, s in manifest["steps"].items()},
            "metrics": {v: {k: m[v].get(k) for k in KEYS} for v in VARIANTS if v in m}}


def summarise(results: list[dict]) -> dict:
    out: dict = {}
    for v in VARIANTS:
        for k in KEYS:
            vals = [r["metrics"][v][k] for r in results if v in r["metrics"] and r["metrics"][v].get(k) is not None]
            if vals:
                out[(v, k)] = (statistics.mean(vals), min(vals), max(vals))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    root = args.root or default_root("ci").parent / "bench_drill_pipeline"
    print(f"ci drill over seeds {args.seeds}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = []
    for seed in args.seeds:
        r = run_seed(seed, root)
        results.append(r)
        print(f"seed {seed}: {r['seconds']:.0f} s  " + "  ".join(
            f"{v}: new {r['metrics'][v]['test pass@1 (new instances)']:.2f} / held-out "
            f"{r['metrics'][v]['test pass@1 (held-out combinations)']:.2f}" for v in r["metrics"]))
    summ = summarise(results)
    print(f"\n{'variant':<14}{'metric':<38}{'mean':>8}{'min':>8}{'max':>8}")
    for (v, k), (mean, lo, hi) in summ.items():
        print(f"{v:<14}{k:<38}{mean:8.3f}{lo:8.3f}{hi:8.3f}")
    comparisons = {}
    if ("raw_sft", KEYS[0]) in summ and ("pipeline_sft", KEYS[0]) in summ:
        for key in KEYS[:2]:
            c = comparisons[key] = scoreboard.seed_comparison(results, key)
            print(f"\npipeline − raw, {key}: mean {c['lead']:+.3f} (per seed "
                  f"{', '.join(f'{d:+.2f}' for d in c['diffs'])}); spread {c['spread']:.3f} → {c['verdict']}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        cfg = drill.config_from_profile("ci")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "cpu_has_bf16": sft.cpu_has_bf16(),
            "sft_overrides": cfg.sft_overrides, "sft_parallel": cfg.sft_parallel, "train_size": cfg.train_size,
            "eval_size": cfg.eval_size, "results": results, "comparisons": comparisons}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
