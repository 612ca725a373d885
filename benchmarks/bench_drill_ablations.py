"""Benchmark of issue 35's ablations: which factor makes the drill's raw SFT → pipeline SFT gap?

Runs the ci drill once per seed with ``--ablations`` (:mod:`course_lib.drill.ablations`): besides raw SFT and
pipeline SFT (gold rule teacher), SFT on the same training rows with the same SFT steps on

- ``raw_clean``      the raw rows without their simulated defects,
- ``raw_code``       the raw answers reduced to their code (extract + one python fence),
- ``raw_filter``     the raw rows that pass a cheap filter (a closed Python fence that compiles and defines the
                     named function),
- ``pipeline_noisy`` the pipeline's rows with the noisy rule teacher (``drill.teacher_noise``),
- ``pipeline_llm``   the pipeline's rows with the LLM teacher (SmolLM2; only with ``--with-llm-teacher``: hours on
                     2 cores the first time). When it keeps no row it has no model: the JSON says so with the count.

Per seed and variant it records test pass@1 per eval part and every eval prompt's outcome (step 5's
``per_prompt.jsonl``, copied to ``results/bench_drill_ablations/seed<N>/<variant>.jsonl``:
:func:`course_lib.drill.scoreboard.save_benchmark_per_prompt`, the format of ``bench_drill_pipeline.json``), and per
eval scope (the two parts and the two halves of the held-out part) each variant's difference from raw SFT with
the course's paired 95 % interval over seeds and prompts and its verdict
(:func:`course_lib.drill.scoreboard.paired_comparison`). ``--resummarise`` recomputes the comparisons from the
recorded per-prompt files without running anything. Lesson 07 reads the JSON (the table and the plot of "how much
of the gap each factor explains").

Usage::

    PYTHONPATH=$PWD python benchmarks/bench_drill_ablations.py                   # seeds 0 1 2, fp32 → results/
    PYTHONPATH=$PWD python benchmarks/bench_drill_ablations.py --toy             # end to end at toy size (minutes)
    ... --seeds 0 1 2 --root DIR --json FILE --with-llm-teacher
    PYTHONPATH=$PWD python benchmarks/bench_drill_ablations.py --resummarise    # comparisons from the recorded files

``--toy``: 64 training rows, 40 eval rows, no HumanEval, 5 SFT steps, written under the toy root (never over the
recorded results). Each seed of the real run costs one ci drill with 6 SFT variants instead of 2 (SFT two at a
time on 2 cores) and 5 models answering instead of 3; the drill folders are cached, so a rerun reads them back.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from course_lib import drill
from course_lib.drill import scoreboard
from course_lib.drill.config import ABLATIONS, default_root
from course_lib.drill.outputs import DrillPaths, setup_logging
from course_lib.drill.scoreboard import SCOPES
from course_lib.drill.taskgen import EVAL_PARTS
from course_lib.training.sft import cpu_kind

RESULTS = Path(__file__).resolve().parent / "results" / "bench_drill_ablations.json"
COMPARED = ("raw_sft", "pipeline_sft", *ABLATIONS)
INTERVAL = ("each variant − raw SFT on the same prompts: the course's paired 95 % bootstrap interval, resampling the "
            "seeds and the prompts within each (course_lib.drill.scoreboard.paired_comparison → "
            "course_lib.evaluation.paired.paired_pass_difference)")
TOY = {"train_size": 64, "eval_size": 40, "humaneval_subset": 0, "sft_steps": 5}


def run_seed(seed: int, variants: tuple[str, ...], root: Path, toy: bool, json_path: Path) -> dict:
    sizes = dict(TOY) if toy else {}
    steps = sizes.pop("sft_steps", None)
    cfg = drill.config_from_profile("ci", seed=seed, compare_raw=True, evaluate_base=False, ablations=variants,
                                    paths=DrillPaths.under(root / f"seed{seed}"), sft_steps=steps, **sizes)
    cfg.sft_overrides = {**cfg.sft_overrides, "seed": seed, "bf16": False}
    cfg.paths.make()
    setup_logging(cfg.paths.log_dir, quiet=True)
    t0 = time.monotonic()
    state = drill.RunState()
    drill.run_drill(cfg, state=state)
    metrics = drill.load_metrics(cfg)
    out: dict = {"seed": seed, "seconds": round(time.monotonic() - t0, 1), "variants": {}}
    for v in COMPARED:
        if v not in ("raw_sft", "pipeline_sft") and v not in variants:
            continue
        entry: dict = {}
        if v in ABLATIONS:
            report_path = cfg.paths.ablation_report(v)
            report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else {}
            entry["training_set"] = {k: report.get(k) for k in ("input", "kept", "removed", "by_defect", "left_out")}
            if report.get("teacher_report"):
                entry["teacher_report"] = {k: report["teacher_report"].get(k) for k in (
                    "n_input", "n_kept", "keep_rate", "kept_tested", "kept_correct", "audited_tested",
                    "audited_correct", "auc_llm")}
            if report.get("left_out"):
                entry["left_out"] = report["left_out"]
        if v in metrics:
            entry["metrics"] = {k: metrics[v].get(k) for k in (
                *(f"test pass@1 ({p})" for p in SCOPES), "test pass@1", "FCR", "closed-fence rate")}
        elif "left_out" not in entry:
            entry["left_out"] = state.left_out.get(v, "no model: see the drill's log")
        out["variants"][v] = entry
    trained = [v for v, e in out["variants"].items() if "metrics" in e]
    out["per_prompt"] = scoreboard.save_benchmark_per_prompt(
        cfg, trained, json_path.parent / json_path.stem / f"seed{seed}", json_path.parent)
    return out


def compare(results: list[dict], base_dir: Path) -> dict:
    """Per eval scope (:data:`course_lib.drill.scoreboard.SCOPES`): raw SFT's mean test pass@1 and each other
    variant's, with its difference from raw SFT: the course's paired 95 % interval over seeds and prompts and the
    verdict (:func:`course_lib.drill.scoreboard.paired_comparison`); a variant without a model in some seed has its
    reason instead."""
    per_prompt = {}
    for v in COMPARED:
        if all(v in (r.get("per_prompt") or {}) for r in results):
            per_prompt[v] = scoreboard.benchmark_per_prompt(results, v, base_dir)
    comparisons: dict = {}
    for scope in SCOPES:
        metric = f"test pass@1 ({scope})"
        comp: dict = {}
        for v in COMPARED:
            if v == "raw_sft" or not any(v in r["variants"] for r in results):
                continue
            left = [r["variants"].get(v, {}).get("left_out") for r in results]
            if any(left) or v not in per_prompt:
                comp[v] = {"left_out": next((x for x in left if x), "no per-prompt outcomes recorded")}
                continue
            c = scoreboard.paired_comparison(per_prompt[v], per_prompt["raw_sft"], metric, v, "raw SFT")
            comp[v] = {"mean": c["a"], **{k: c[k] for k in (
                "diff", "low", "high", "se", "p_mcnemar", "prompts", "seeds", "per_seed", "verdict")}}
        comp["raw_sft"] = {"mean": comp["pipeline_sft"]["mean"] - comp["pipeline_sft"]["diff"]
                           if "diff" in comp.get("pipeline_sft", {}) else None,
                           "per_seed": [r["variants"]["raw_sft"].get("metrics", {}).get(metric) for r in results]}
        comparisons[scope] = comp
    if not any("pipeline_llm" in r["variants"] for r in results):
        why = llm_teacher_left_out(base_dir)
        if why:
            for comp in comparisons.values():
                comp["pipeline_llm"] = {"left_out": why}
    return comparisons


def llm_teacher_left_out(results_dir: Path) -> str | None:
    """Why ``pipeline_llm`` has no row when it was not run: what ``bench_llm_teacher.json`` measured SmolLM2's
    pipeline keep on a sample of the same training rows (None when that benchmark is not recorded)."""
    path = results_dir / "bench_llm_teacher.json"
    if not path.exists():
        return None
    b = json.loads(path.read_text(encoding="utf-8"))
    r, w = b["report"], b["workload"]
    reasons = sorted(b.get("dropped_by_reason", {}).items(), key=lambda kv: -kv[1])
    top = f"; most dropped by {reasons[0][0].split(':')[0]} ({reasons[0][1]})" if reasons else ""
    return (f"not trained: SmolLM2's pipeline kept {r['n_kept']} of {w['rows']} sampled training rows "
            f"(bench_llm_teacher.json{top}), {b['run']['pipeline_seconds']:.0f} s for those; "
            f"run --with-llm-teacher to train on what it keeps of all {w['of_train_rows']}")


def print_comparisons(comparisons: dict) -> None:
    for part, comp in comparisons.items():
        print(f"\n{part}: variant − raw SFT, test pass@1 (paired 95% interval over seeds and prompts)")
        for v, c in comp.items():
            if c.get("left_out"):
                print(f"  {v:<16} {c['left_out']}")
            elif "diff" in c:
                print(f"  {v:<16} mean {c['mean']:.3f}  {c['diff']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]  "
                      f"{c['verdict'].split(':')[0]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--variants", default=None,
                    help=f"comma-separated ablations (default: {', '.join(a for a in ABLATIONS if a != 'pipeline_llm')})")
    ap.add_argument("--with-llm-teacher", action="store_true",
                    help="also pipeline_llm (SmolLM2 as the pipeline's teacher: hours on 2 cores the first time)")
    ap.add_argument("--toy", action="store_true", help=f"toy size ({TOY}), to check the benchmark end to end")
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--resummarise", action="store_true",
                    help="recompute the comparisons of --json (default: the recorded file) from its per-prompt files; "
                         "runs nothing")
    args = ap.parse_args(argv)
    variants = tuple(args.variants.split(",")) if args.variants else tuple(a for a in ABLATIONS if a != "pipeline_llm")
    if args.with_llm_teacher and "pipeline_llm" not in variants:
        variants += ("pipeline_llm",)
    root = args.root or default_root("ci").parent / ("bench_drill_ablations_toy" if args.toy else "bench_drill_ablations")
    json_path = args.json or (root / "bench_drill_ablations.json" if args.toy else RESULTS)
    if args.resummarise:
        if not json_path.exists():
            raise SystemExit(f"--resummarise: {json_path} does not exist; run the benchmark first")
        bench = json.loads(json_path.read_text(encoding="utf-8"))
        bench["comparisons"] = compare(bench["results"], json_path.parent)
        bench["interval"] = INTERVAL
        json_path.write_text(json.dumps(bench, indent=1) + "\n", encoding="utf-8")
        print_comparisons(bench["comparisons"])
        print(f"\nrewrote the comparisons of {json_path}")
        return 0
    print(f"ci drill with ablations {', '.join(variants)} over seeds {args.seeds}{' (toy size)' if args.toy else ''}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = []
    for seed in args.seeds:
        r = run_seed(seed, variants, root, args.toy, json_path)
        results.append(r)
        print(f"seed {seed}: {r['seconds']:.0f} s  " + "  ".join(
            f"{v}: " + ("left out" if e.get("left_out") else " / ".join(
                f"{e['metrics'][f'test pass@1 ({p})']:.2f}" for p in EVAL_PARTS)) for v, e in r["variants"].items()))
    comparisons = compare(results, json_path.parent)
    print_comparisons(comparisons)
    cfg = drill.config_from_profile("ci")
    json_path.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "cpu": cpu_kind(), "toy": args.toy,
        "seeds": args.seeds, "variants": list(variants), "teacher_noise": cfg.teacher_noise,
        "sft_overrides": {**cfg.sft_overrides, "bf16": False, **({"max_steps": TOY["sft_steps"]} if args.toy else {})},
        "train_size": TOY["train_size"] if args.toy else cfg.train_size,
        "eval_size": TOY["eval_size"] if args.toy else cfg.eval_size,
        "interval": INTERVAL,
        "format": "per-prompt outcomes beside the JSON (results[i].per_prompt: variant -> path relative to the JSON's "
                  "folder), as in bench_drill_pipeline.json",
        "results": results,
        "comparisons": comparisons}, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {json_path} and the per-prompt files under {json_path.parent / json_path.stem}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
