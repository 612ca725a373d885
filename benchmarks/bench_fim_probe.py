"""Lesson 04's FIM probe over several training seeds: does FIM help on short middles, seed after seed?

For each seed s this trains the course's two tiny models (``nofim`` and ``base``, FIM rate 0.5) with
training seed s (the cached seed-0 pair is reused for s = 0), then runs ``fim_probe.compare`` on s's sample
of held-out tasks — what lesson 04 does with ``SEED = s``. Another seed is the practical stand-in for
another CPU: fp32 kernels differ between instruction sets, so two machines train two different models
from the same seed. It prints per seed and class whether FIM helped (sign test p < 0.05), the middle's
loss under the four setups, and in the end how many seeds agree on each statement lesson 04 makes.

    PYTHONPATH=$PWD python benchmarks/bench_fim_probe.py [--seeds 0 1 2] \
        [--json benchmarks/results/bench_fim_probe.json]

Lesson 04 prints the recorded result beside its own run. ci: about 2 min a seed on 2 cores (two models
of 300 steps, 180 probe tasks).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time

from course_lib.profiles import get_profile
from course_lib.training import fim, fim_probe, tinymodel
from course_lib.training.sft import cpu_kind


def run_seed(profile: str, seed: int, n: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    P = dataclasses.replace(get_profile(profile), seed=seed)
    t0 = time.time()
    dirs = {name: tinymodel.get_tiny_model(name, P) for name in ("nofim", "base")}
    trained = time.time() - t0
    torch.manual_seed(seed)
    models = {name: AutoModelForCausalLM.from_pretrained(d).eval() for name, d in dirs.items()}
    tok = AutoTokenizer.from_pretrained(dirs["base"])
    held_out = tinymodel.pretraining_corpus(P).snippets("held_out")
    t1 = time.time()
    probe = fim_probe.compare(models, tok, held_out, n=n, seed=seed)
    # lesson 04's whole-line infill (24 held-out lines, PSM prompt, greedy): exact matches per model
    lines = fim.line_infill_tasks(held_out, 24, seed=seed)
    exact = {name: sum(fim.infill(m, tok, p, s_, sentinels="qwen2.5-coder", max_new_tokens=24,
                                  stop_at_newline=True).strip() == mid for p, mid, s_ in lines)
             for name, m in models.items()}
    final = {name: json.loads((d / "training_log.json").read_text())["eval"][-1] for name, d in dirs.items()}
    return {"seed": seed, "train_seconds": round(trained, 1), "probe_seconds": round(time.time() - t1, 1),
            "final_losses": {name: {k: round(e[k], 4) for k in ("l2r_loss", "middle_loss")} for name, e in final.items()},
            "statements": fim_probe.statements(probe), "line_infill_exact": exact, "line_infill_tasks": len(lines),
            "classes": {r.kind: {"tasks": r.tasks, "nll": {k: round(v, 4) for k, v in r.nll.items()},
                                 "right": r.right, "fim_lower": r.fim_lower, "fim_higher": r.fim_higher,
                                 "p_value": round(r.p_value, 5), "helps": r.fim_helps(),
                                 "format_p_value": round(r.format_p_value, 5)} for r in probe}}


def summarise(rows: list[dict]) -> dict:
    """How many seeds support each statement lesson 04 can make about the probe (``fim_probe.statements``)."""
    classes = list(rows[0]["classes"])
    counts = {k: sum(r["statements"][k] for r in rows) for k in rows[0]["statements"]}
    loss = [r["final_losses"] for r in rows]
    return {"seeds": len(rows), **counts,
            "helped, per class": {c: sum(r["classes"][c]["helps"] for r in rows) for c in classes},
            "FIM model lower left-to-right loss": sum(f["base"]["l2r_loss"] < f["nofim"]["l2r_loss"] for f in loss),
            "FIM model lower middle-token loss": sum(f["base"]["middle_loss"] < f["nofim"]["middle_loss"] for f in loss),
            "lowest held-out loss of any seed and model": min(v for r in rows for e in r["final_losses"].values()
                                                              for v in e.values()),
            "line infill exact matches, most of any seed and model": max(max(r["line_infill_exact"].values()) for r in rows),
            "line infill tasks": rows[0]["line_infill_tasks"]}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="ci")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--tasks", type=int, default=60, help="held-out tasks per class (lesson 04: 60)")
    p.add_argument("--json", default=None, help="also write the per-seed results to this file")
    args = p.parse_args(argv)
    if len(args.seeds) < 3:
        p.error("the spread needs at least 3 seeds")
    rows = []
    for seed in args.seeds:
        row = run_seed(args.profile, seed, args.tasks)
        rows.append(row)
        print(f"seed {seed}: trained in {row['train_seconds']} s, probe {row['probe_seconds']} s")
        for kind, c in row["classes"].items():
            print(f"  {kind:<17} helps={c['helps']!s:<5} p={c['p_value']:.4f}  "
                  + "  ".join(f"{k} {v:.3f}" for k, v in c["nll"].items()))
    summary = summarise(rows)
    print(json.dumps(summary, indent=1))
    result = {"benchmark": "bench_fim_probe", "profile": args.profile, "cpu": cpu_kind(),
              "bf16": "off (fp32 training)", "tasks_per_class": args.tasks, "seeds": rows, "summary": summary,
              "command": "PYTHONPATH=$PWD python benchmarks/bench_fim_probe.py --seeds "
                         + " ".join(map(str, args.seeds)) + " --json benchmarks/results/bench_fim_probe.json"}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
