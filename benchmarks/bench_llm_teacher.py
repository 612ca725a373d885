"""SmolLM2-135M-Instruct as the codegen pipeline's teacher, on the drill's ci training rows (issue #36).

The lesson's LazyLLM pipeline (instruction standardisation → script synthesis → LogicIntegrityAuditor 0–10 →
ThresholdSieve → formatter) with the ci profile's ``models.teacher`` served by the course's vLLM on 127.0.0.1
(:func:`course_lib.training.llm_teacher.run_teacher_pipeline`: fp32 on CPU, greedy, the profile's knobs) over
``--rows`` of the drill's training rows (a seeded sample; the rows reach the teacher without their hidden
tests), then :func:`course_lib.training.codegen.teacher_report`: keep rate, kept rows that pass the hidden
tests, the auditor's AUC for passing, the execution-based audit on the same code, the raw rows' own answers.

    PYTHONPATH=$PWD python benchmarks/bench_llm_teacher.py [--rows N] [--seed S]

The drill's training rows come from its step 1 (``python -m course_lib.drill --only-step download``). The
pipeline's output is cached (a rerun reads it back, and says so); the tokens/s and the load average beside
them are those of the run that wrote it. Writes ``benchmarks/results/bench_llm_teacher.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import time
from functools import partial
from pathlib import Path

from course_lib import get_profile
from course_lib.drill import config
from course_lib.evaluation import sandbox
from course_lib.training import codegen, llm_teacher, pretrained

RESULTS = Path(__file__).resolve().parent / "results" / "bench_llm_teacher.json"


def cpu_model() -> str:
    """``lscpu``'s model name (else the platform's processor)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    P = get_profile("ci")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200, help="training rows through the pipeline (a seeded sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    why = llm_teacher.teacher_unavailable(P)
    if why:
        print(f"the LLM teacher cannot run here: {why}")
        return 1
    backend = sandbox.preferred_backend()
    if backend is None:
        print(f"no sandbox backend works here {sandbox.available_backends()}: the hidden tests cannot run")
        return 1
    train_json = config.config_from_profile(P).paths.train_json
    if not train_json.is_file():
        print(f"{train_json} is missing: run the drill's step 1 (python -m course_lib.drill --only-step download)")
        return 1
    all_rows = json.loads(train_json.read_text(encoding="utf-8"))
    rows = random.Random(args.seed).sample(all_rows, min(args.rows, len(all_rows)))
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    run = llm_teacher.run_teacher_pipeline(rows, profile=P, name="bench")
    wall = time.monotonic() - t0
    measured = codegen.teacher_report(rows, run.kept, run.report,
                                      run_many=partial(sandbox.run_many, backend=backend, workers=2),
                                      run_code=partial(sandbox.run_code, backend=backend), profile=P)
    print(run.report.summary())
    print(measured.summary())
    print(measured.table().to_string(index=False))
    dropped = {}
    for d in run.report.dropped:
        key = f"{d['stage']}: {d['reason'][:70]}"
        dropped[key] = dropped.get(key, 0) + 1
    model = pretrained.get_pretrained_model(P, "teacher")
    out = {"model": pretrained.describe(model), "teacher": run.report.teacher,
           "workload": {"rows": len(rows), "of_train_rows": len(all_rows), "seed": args.seed,
                        "source": "the drill's ci training rows (train_python.json), a seeded sample",
                        "settings": run.settings},
           "machine": {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
                       "loadavg_at_generation": run.engine.get("loadavg_1min"),
                       "loadavg_this_call": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                       "note": "our processes at nice 10; the load average says how busy the machine was "
                               "(at generation: when the pipeline's answers were written, maybe by an earlier call)"},
           "date": time.strftime("%Y-%m-%d %H:%M"),
           "run": {"cached": run.cached, "wall_seconds_this_call": round(wall, 1),
                   **{k: v for k, v in run.engine.items() if k != "vllm_python"},
                   "tokens_per_s": None if run.tokens_per_s is None else round(run.tokens_per_s, 2)},
           "funnel": run.report.stages, "dropped_by_reason": dict(sorted(dropped.items(), key=lambda kv: -kv[1])),
           "report": measured.to_dict(),
           "table": json.loads(measured.table().to_json(orient="records"))}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
