"""Benchmark of lesson 07's thesis: does SFT on the pipeline's data beat SFT on the raw (noisy) data?

Runs the ci drill (download → LazyLLM pipeline with the course's rule teacher → raw SFT and pipeline SFT
through LazyLLM → LLaMA-Factory → inference → sandboxed evaluation) once per seed and precision, each in
its own folder, and prints per variant the hidden-test pass@1 on the two eval parts (new instances of
trained task families, held-out combinations; the answer starts with the function's signature,
HumanEval's protocol), the hidden tests on the free answer, ``names the function``, Pass@1, FCR, the
closed-fence rate and PPL on both reference formats: the mean and the range over seeds. Then pipeline SFT −
raw SFT (and pipeline SFT − base) on test pass@1 on each eval part and each half of the held-out part, FCR
and the closed-fence rate, from the per-prompt outcomes of every seed: the difference, its 95 % paired
bootstrap interval over seeds and prompts, McNemar's p and the verdict — "ahead" only when the interval
excludes 0, else "no measurable difference" (:func:`course_lib.drill.scoreboard.paired_comparison`).

Each seed's per-prompt outcomes (step 5's ``per_prompt.jsonl``) are copied beside the JSON:
``<json without .json>/<precision>/seed<k>/<variant>.jsonl`` (``benchmarks/results/bench_drill_pipeline/fp32/
seed0/raw_sft.jsonl`` ...), named in the JSON by ``results[i]["per_prompt"]``, so anyone can recompute
the intervals (lesson 07 does).

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
``--toy`` runs a drill of 60 training and 40 eval rows with 5 SFT steps per seed (a few minutes), to check
the file format, never for a verdict: give it a ``--json`` outside ``benchmarks/results``.
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
from course_lib.drill.taskgen import HOLDOUT_HALVES
from course_lib.training import sft

KEYS = ("test pass@1 (new instances)", "test pass@1 (held-out combinations)",
        *(f"test pass@1 (held-out: {h})" for h in HOLDOUT_HALVES), "test pass@1 (free answer)",
        "names the function", "Pass@1", "FCR", "closed-fence rate", "PPL (raw format)", "PPL (pipeline format)")
COMPARED = ("test pass@1 (new instances)", "test pass@1 (held-out combinations)",
            *(f"test pass@1 (held-out: {h})" for h in HOLDOUT_HALVES), "FCR", "closed-fence rate")
TOY = {"train_size": 60, "eval_size": 40, "humaneval_subset": 0, "sft_steps": 5}
VARIANTS = ("base", "raw_sft", "pipeline_sft")
PRECISIONS = ("fp32", "bf16")


def per_prompt_dir(json_path: Path) -> Path:
    """Where the per-prompt files of ``json_path`` live: beside it, in a folder of its name."""
    return json_path.with_suffix("")


def run_seed(seed: int, precision: str, root: Path, per_prompt_to: Path, toy: bool = False) -> dict:
    sizes = {k: v for k, v in TOY.items() if k != "sft_steps"} if toy else {}
    cfg = drill.config_from_profile("ci", seed=seed, compare_raw=True, sft_steps=TOY["sft_steps"] if toy else None,
                                  paths=DrillPaths.under(root / precision / f"seed{seed}"), **sizes)
    cfg.sft_overrides = {**cfg.sft_overrides, "seed": seed, "bf16": precision == "bf16"}
    cfg.paths.make()
    setup_logging(cfg.paths.log_dir, quiet=True)
    t0, c0 = time.monotonic(), os.times()
    drill.run_drill(cfg)
    c1 = os.times()
    m = drill.load_metrics(cfg)
    manifest = json.loads((cfg.paths.output_dir / "run_manifest.json").read_text(encoding="utf-8"))
    funnel = json.loads((cfg.paths.data_dir / "codegen_funnel.json").read_text(encoding="utf-8"))
    where = scoreboard.save_benchmark_per_prompt(cfg, [v for v in VARIANTS if v in m],
                                                 per_prompt_to / precision / f"seed{seed}", per_prompt_to.parent)
    return {"seed": seed, "per_prompt": where, "seconds": round(time.monotonic() - t0, 1),
            "cpu_seconds": round(c1.user + c1.system + c1.children_user + c1.children_system
                                 - c0.user - c0.system - c0.children_user - c0.children_system, 1),
            "step_seconds": {k: s.get("seconds") for k, s in manifest["steps"].items()},
            "sft_train_runtime_s": {v: n.get("train_runtime_s") for v, n in
                                    manifest["steps"].get("sft", {}).get("variants", {}).items()},
            "pipeline_kept": [funnel["kept"], funnel["input"]],
            "metrics": {v: {k: m[v].get(k) for k in KEYS} for v in VARIANTS if v in m}}


FORMAT = ("per-prompt outcomes beside the JSON (results[i].per_prompt: variant -> path relative to the JSON's "
          "folder); comparisons: metric -> the paired 95 % bootstrap interval over seeds and prompts "
          "(course_lib.drill.scoreboard.paired_comparison)")


def compare(results: list[dict], base_dir: Path) -> dict[str, dict]:
    """pipeline SFT − raw SFT and pipeline SFT − base on :data:`COMPARED`, paired over seeds and prompts."""
    out: dict[str, dict] = {}
    for other in ("raw_sft", "base"):
        a = scoreboard.benchmark_per_prompt(results, "pipeline_sft", base_dir)
        b = scoreboard.benchmark_per_prompt(results, other, base_dir)
        comps = scoreboard.compare_variants({"pipeline_sft": a, other: b}, "pipeline_sft", other, COMPARED)
        out[f"pipeline_sft - {other}"] = comps
    return out


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
    ap.add_argument("--toy", action="store_true",
                    help=f"a toy drill per seed ({TOY}): checks the file format, never a verdict")
    args = ap.parse_args(argv)
    results_dir = Path(__file__).resolve().parent / "results"
    if args.toy and (args.json is None or args.json.resolve().parent == results_dir):
        raise SystemExit("--toy writes a toy result: give it a --json outside benchmarks/results")
    json_path = args.json or Path(os.environ.get("TMPDIR", "/tmp")) / "bench_drill_pipeline.json"
    precisions = args.precisions or (["fp32", "bf16"] if sft.cpu_has_bf16() else ["fp32"])
    if "bf16" in precisions and not sft.cpu_has_bf16():
        raise SystemExit("this CPU has no bf16 instructions: bf16 would be emulated (slow, and not what the "
                         "profile runs here); drop --precisions bf16")
    root = args.root or default_root("ci").parent / ("bench_drill_pipeline" + ("_toy" if args.toy else ""))
    print(f"ci drill over seeds {args.seeds}, {', '.join(precisions)}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    saved = json.loads(args.json.read_text(encoding="utf-8")) if args.json and args.json.exists() else {}
    if saved and any("per_prompt" not in r for b in saved.get("precisions", {}).values() for r in b.get("results", [])):
        print(f"{args.json} is in the format before per-prompt outcomes: its other precisions are dropped")
        saved = {}
    by_precision = dict(saved.get("precisions", {}))
    for precision in precisions:
        results = []
        for seed in args.seeds:
            r = run_seed(seed, precision, root, per_prompt_dir(json_path), toy=args.toy)
            results.append(r)
            print(f"{precision} seed {seed}: {r['seconds']:.0f} s (SFT {r['step_seconds'].get('sft')} s), pipeline kept "
                  f"{r['pipeline_kept'][0]}/{r['pipeline_kept'][1]}  " + "  ".join(
                      f"{v}: new {r['metrics'][v]['test pass@1 (new instances)']:.2f} / held-out "
                      f"{r['metrics'][v]['test pass@1 (held-out combinations)']:.2f}" for v in r["metrics"]))
        summ = summarise(results)
        print(f"\n{precision}: {'variant':<14}{'metric':<38}{'mean':>8}{'min':>8}{'max':>8}")
        for (v, k), (mean, lo, hi) in summ.items():
            print(f"      {v:<14}{k:<38}{mean:8.3f}{lo:8.3f}{hi:8.3f}")
        comparisons = compare(results, per_prompt_dir(json_path).parent)
        for key, c in comparisons["pipeline_sft - raw_sft"].items():
            print(f"{precision}: {key}: per seed {', '.join(f'{d:+.3f}' for d in c['per_seed'])} → {c['verdict']}")
        overrides = {**drill.config_from_profile("ci").sft_overrides, "bf16": precision == "bf16"}
        by_precision[precision] = {"date": time.strftime("%Y-%m-%d"), "seeds": args.seeds, "sft_overrides": overrides,
                                   "cores": os.cpu_count(), "results": results,
                                   "comparisons": comparisons["pipeline_sft - raw_sft"],
                                   "comparisons_vs_base": comparisons["pipeline_sft - base"]}
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    cfg = drill.config_from_profile("ci", **({k: v for k, v in TOY.items() if k != "sft_steps"} if args.toy else {}))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "cpu_has_bf16": sft.cpu_has_bf16(),
        "toy": args.toy, "sft_overrides": cfg.sft_overrides, "sft_parallel": cfg.sft_parallel,
        "train_size": cfg.train_size, "eval_size": cfg.eval_size, "format": FORMAT, "precisions": by_precision},
        indent=1) + "\n")
    print(f"wrote {json_path} and the per-prompt files under {per_prompt_dir(json_path)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
