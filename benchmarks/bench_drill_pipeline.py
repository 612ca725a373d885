"""Benchmark of lesson 07's thesis: does SFT on the pipeline's data beat SFT on the raw (noisy) data?

Runs the ci drill (download → LazyLLM pipeline with the course's rule teacher → raw SFT and pipeline SFT
through LazyLLM → LLaMA-Factory → inference → sandboxed evaluation) once per seed and precision, each in
its own folder, and prints per variant the hidden-test pass@1 on the two eval parts (new instances of
trained task families, held-out combinations; the answer starts with the function's signature,
HumanEval's protocol), the hidden tests on the free answer, ``names the function``, Pass@1, FCR, the
closed-fence rate and PPL on both reference formats: the mean and the range over seeds. Then, paired by
seed (each seed trains both variants on the same split), pipeline SFT − raw SFT per seed, their spread
and the verdict (:func:`course_lib.drill.scoreboard.seed_comparison`).

Precisions: ``fp32`` (``sft.bf16`` off: what every CPU runs, the one the budget is set for) and, where
the CPU has bf16 instructions, ``bf16`` (the ci profile's ``"auto"`` turns it on there). The seed changes
the train/eval split and the SFT seed; the base model (lesson 04's tiny model) is the same.

Usage::

    PYTHONPATH=$PWD python benchmarks/bench_drill_pipeline.py                      # seeds 0 1 2, fp32 (+ bf16)
    PYTHONPATH=$PWD python benchmarks/bench_drill_pipeline.py --precisions fp32 --json benchmarks/results/bench_drill_pipeline.json
    ... --seeds 0 1 2 --root DIR      (each run's drill folder; default: the course cache)

``--json`` merges into the file: a precision not run keeps its earlier results (lesson 07 prints them).
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
from course_lib.drill.config import default_root
from course_lib.drill.outputs import DrillPaths, setup_logging
from course_lib.training import sft

KEYS = ("test pass@1 (new instances)", "test pass@1 (held-out combinations)", "test pass@1 (free answer)",
        "names the function", "Pass@1", "FCR", "closed-fence rate", "PPL (raw format)", "PPL (pipeline format)")
COMPARED = ("test pass@1 (new instances)", "test pass@1 (held-out combinations)", "FCR", "closed-fence rate")
VARIANTS = ("base", "raw_sft", "pipeline_sft")
PRECISIONS = ("fp32", "bf16")


def run_seed(seed: int, precision: str, root: Path) -> dict:
    cfg = drill.config_from_profile("ci", seed=seed, compare_raw=True,
                                  paths=DrillPaths.under(root / precision / f"seed{seed}"))
    cfg.sft_overrides = {**cfg.sft_overrides, "seed": seed, "bf16": precision == "bf16"}
    cfg.paths.make()
    setup_logging(cfg.paths.log_dir, quiet=True)
    t0, c0 = time.monotonic(), os.times()
    drill.run_drill(cfg)
    c1 = os.times()
    m = drill.load_metrics(cfg)
    manifest = json.loads((cfg.paths.output_dir / "run_manifest.json").read_text(encoding="utf-8"))
    funnel = json.loads((cfg.paths.data_dir / "codegen_funnel.json").read_text(encoding="utf-8"))
    return {"seed": seed, "seconds": round(time.monotonic() - t0, 1),
            "cpu_seconds": round(c1.user + c1.system + c1.children_user + c1.children_system
                                 - c0.user - c0.system - c0.children_user - c0.children_system, 1),
            "step_seconds": {k: s.get("seconds") for k, s in manifest["steps"].items()},
            "sft_train_runtime_s": {v: n.get("train_runtime_s") for v, n in
                                    manifest["steps"].get("sft", {}).get("variants", {}).items()},
            "pipeline_kept": [funnel["kept"], funnel["input"]],
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
    ap.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=None,
                    help="fp32, bf16 (default: fp32, and bf16 where the CPU has bf16 instructions)")
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    precisions = args.precisions or (["fp32", "bf16"] if sft.cpu_has_bf16() else ["fp32"])
    if "bf16" in precisions and not sft.cpu_has_bf16():
        raise SystemExit("this CPU has no bf16 instructions: bf16 would be emulated (slow, and not what the "
                         "profile runs here); drop --precisions bf16")
    root = args.root or default_root("ci").parent / "bench_drill_pipeline"
    print(f"ci drill over seeds {args.seeds}, {', '.join(precisions)}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    saved = json.loads(args.json.read_text(encoding="utf-8")) if args.json and args.json.exists() else {}
    by_precision = dict(saved.get("precisions", {}))
    for precision in precisions:
        results = []
        for seed in args.seeds:
            r = run_seed(seed, precision, root)
            results.append(r)
            print(f"{precision} seed {seed}: {r['seconds']:.0f} s (SFT {r['step_seconds'].get('sft')} s), pipeline kept "
                  f"{r['pipeline_kept'][0]}/{r['pipeline_kept'][1]}  " + "  ".join(
                      f"{v}: new {r['metrics'][v]['test pass@1 (new instances)']:.2f} / held-out "
                      f"{r['metrics'][v]['test pass@1 (held-out combinations)']:.2f}" for v in r["metrics"]))
        summ = summarise(results)
        print(f"\n{precision}: {'variant':<14}{'metric':<38}{'mean':>8}{'min':>8}{'max':>8}")
        for (v, k), (mean, lo, hi) in summ.items():
            print(f"      {v:<14}{k:<38}{mean:8.3f}{lo:8.3f}{hi:8.3f}")
        comparisons = {}
        for key in COMPARED:
            c = comparisons[key] = scoreboard.seed_comparison(results, key)
            print(f"{precision}: pipeline − raw, {key}: per seed {', '.join(f'{d:+.3f}' for d in c['diffs'])}; "
                  f"mean {c['lead']:+.3f}, spread {c['spread']:.3f} → {c['verdict']}")
        overrides = {**drill.config_from_profile("ci").sft_overrides, "bf16": precision == "bf16"}
        by_precision[precision] = {"date": time.strftime("%Y-%m-%d"), "seeds": args.seeds, "sft_overrides": overrides,
                                   "cores": os.cpu_count(), "results": results, "comparisons": comparisons}
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        cfg = drill.config_from_profile("ci")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "cpu_has_bf16": sft.cpu_has_bf16(),
            "sft_overrides": cfg.sft_overrides, "sft_parallel": cfg.sft_parallel, "train_size": cfg.train_size,
            "eval_size": cfg.eval_size, "precisions": by_precision}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
