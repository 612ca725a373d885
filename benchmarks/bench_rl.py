"""Benchmark of lesson 10's claim: does RL on the sandbox's reward beat pipeline SFT, beyond seed noise?

For each seed and reward (issue 25: seeds 0, 1, 2; rewards ``pass``, ``fraction``, ``lecture``) this runs the
drill's step 6 training — :func:`course_lib.rl.train_grpo` from the ci drill's ``pipeline_sft`` model on
its training rows' prompts, the profile's RL settings with that seed and reward — and then measures the
trained model as step 5 measures every variant: greedy test pass@1 with the task's signature given, on new
instances and on held-out combinations (:func:`course_lib.rl.greedy_test_pass1`, the drill's inference
engine and judge). ``pipeline_sft`` is measured once the same way. Per (seed, reward): the paired
difference RL − SFT on each eval part. Per reward: the mean over seeds, the spread (min–max of the
differences) and a verdict against the issue's target: ahead by >= 0.10 on held-out combinations in the
mean, beyond the spread (the smallest difference > 0), and not behind on new instances (mean >= 0).

pass@k (``--passk-prompts`` > 0): k = 1..K from K sampled answers per eval prompt
(:func:`course_lib.rl.sample_pass_at_k`) before (SFT) and after RL, per part — does RL raise pass@1 only
by sharpening the distribution, or does pass@K move too?

Usage::

    PYTHONPATH=$PWD python -m course_lib.drill --no-rl              # first: the ci drill's steps 1-5 (cached)
    PYTHONPATH=$PWD python benchmarks/bench_rl.py                   # 3 seeds x 3 rewards: ~9 RL runs (long)
    PYTHONPATH=$PWD python benchmarks/bench_rl.py --seeds 0 --rewards pass --passk-prompts 10   # one probe
    ... --json benchmarks/results/bench_rl.json  (the default; lesson 10 prints its verdict)

Each RL run costs one step-6 training (the profile's rl section: ~2.5-5 min on 2 cores in fp32) plus one
greedy evaluation (~1 min with vLLM) and, with pass@k, K samples per chosen eval prompt.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from course_lib import drill
from course_lib.drill.outputs import DrillPaths, read_json_output, setup_logging
from course_lib.paths import display_path
from course_lib.rl import REWARDS, greedy_test_pass1, rl_settings, sample_pass_at_k, train_grpo

PARTS = ("new instances", "held-out combinations")
TARGET_HELD_OUT = 0.10
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "bench_rl.json"


def measure(model: str, evals: list, settings, passk_prompts: int) -> dict:
    t0 = time.monotonic()
    out = {"test pass@1": {p: v for p, v in greedy_test_pass1(model, evals, profile="ci").items() if p in PARTS}}
    if passk_prompts:
        pk = sample_pass_at_k(model, evals, settings, limit_per_part=passk_prompts)
        out["pass@k"] = {part: [res[f"pass@{k}"] for k in range(1, pk["n"] + 1)] for part, res in pk["parts"].items()}
    out["eval_seconds"] = round(time.monotonic() - t0, 1)
    return out


def sft_settings_of(cfg) -> dict:
    """The SFT settings pipeline_sft was trained with (bf16, max_steps, seed ...), from its step-3 marker."""
    marker = Path(str(cfg.paths.model_record("pipeline_sft")) + ".done.json")
    conf = json.loads(marker.read_text(encoding="utf-8")).get("config", {}) if marker.exists() else {}
    keys = ("bf16", "max_steps", "per_device_train_batch_size", "learning_rate", "seed")
    return {k: {**conf.get("settings", {}), **conf.get("overrides", {})}.get(k) for k in keys}


def verdict(diffs: dict[str, list[float]]) -> dict:
    held, new = diffs["held-out combinations"], diffs["new instances"]
    mean_held, mean_new = statistics.mean(held), statistics.mean(new)
    spread = (min(held), max(held))
    ok = mean_held >= TARGET_HELD_OUT and min(held) > 0 and mean_new >= 0
    why = (f"held-out {mean_held:+.3f} (per seed {', '.join(f'{d:+.2f}' for d in held)}), new {mean_new:+.3f} "
           f"(per seed {', '.join(f'{d:+.2f}' for d in new)})")
    return {"mean_held_out": mean_held, "mean_new": mean_new, "held_out_spread": spread,
            "meets_target": ok, "text": ("meets" if ok else "misses") + f" the target (+{TARGET_HELD_OUT:.2f} held-out "
                                          f"beyond the spread, not behind on new): {why}"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--rewards", nargs="+", choices=REWARDS, default=list(REWARDS))
    p.add_argument("--steps", type=int, default=None, help="RL steps (default: the profile's)")
    p.add_argument("--group-size", type=int, default=None, help="K rollouts per prompt (default: the profile's, 8)")
    p.add_argument("--passk-prompts", type=int, default=10, help="eval prompts per part for pass@k (0: none)")
    p.add_argument("--out", type=Path, default=None, help="where the RL runs go (default: <drill root>/bench_rl)")
    p.add_argument("--drill-root", type=Path, default=None,
                   help="the ci drill's folder whose pipeline_sft RL starts from (default: the course cache's "
                        "drill/ci), e.g. a seed folder of bench_drill_pipeline.py: .cache/course/drill/"
                        "bench_drill_pipeline/fp32/seed0")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--merge", action="store_true",
                   help="keep the runs of other rewards already in --json (same steps), e.g. to add a reward later")
    args = p.parse_args(argv)

    cfg = drill.config_from_profile("ci", paths=DrillPaths.under(args.drill_root) if args.drill_root else None)
    setup_logging(cfg.paths.log_dir, quiet=True)
    problems = drill.check_prerequisites(cfg, ["rl"])
    if problems:
        print("run the ci drill first (`python -m course_lib.drill --no-rl`):\n  - " + "\n  - ".join(problems))
        return 1
    start = drill.model_path_for(cfg, "pipeline_sft")
    rows = read_json_output(cfg.paths.codegen_json, "pipeline")
    hidden = {int(r["idx"]): r for r in read_json_output(cfg.paths.train_json, "download") if r.get("tests")}
    evals = read_json_output(cfg.paths.eval_json, "download")
    out_root = args.out or cfg.paths.data_dir.parent / "bench_rl"
    t_all = time.monotonic()
    base_settings = rl_settings("ci", steps=args.steps, group_size=args.group_size)
    sft = measure(start, evals, base_settings, args.passk_prompts)
    print(f"pipeline SFT: test pass@1 {sft['test pass@1']}", flush=True)
    runs = []
    for reward in args.rewards:
        for seed in args.seeds:
            s = rl_settings("ci", steps=args.steps, group_size=args.group_size, reward=reward, seed=seed)
            res = train_grpo(start, rows, hidden, out_root / f"{reward}_seed{seed}", s, log=lambda m: None)
            log = json.loads(Path(res["train_log"]).read_text())
            after = measure(res["model_path"], evals, s, args.passk_prompts)
            diff = {part: after["test pass@1"][part] - sft["test pass@1"][part] for part in PARTS}
            no_signal = sum(r["groups_without_signal"] for r in log) / max(1, sum(r.get("groups", 0) for r in log))
            runs.append({"reward": reward, "seed": seed, "train_seconds": res["seconds"], "steps": res["steps"],
                         "rl": after, "diff": diff, "groups_without_signal_share": no_signal,
                         "rollout_pass_rate_first_last": [log[0]["pass_rate"], log[-1]["pass_rate"]]})
            print(f"{reward:<8} seed {seed}: RL test pass@1 {after['test pass@1']} diff "
                  f"{ {k: round(v, 3) for k, v in diff.items()} }; {res['seconds']:.0f} s training; "
                  f"{no_signal:.0%} groups without signal", flush=True)
    rewards = list(args.rewards)
    if args.merge and args.json.exists():
        old = json.loads(args.json.read_text(encoding="utf-8"))
        if all(old.get("settings", {}).get(k) == getattr(base_settings, k) for k in ("steps", "group_size")):
            kept = [r for r in old["runs"] if r["reward"] not in args.rewards]
            if "pass@k" not in sft and "pass@k" in old.get("pipeline_sft", {}):
                sft["pass@k"] = old["pipeline_sft"]["pass@k"]      # measured with the same model before
            runs = kept + runs
            rewards = list(dict.fromkeys([r["reward"] for r in kept] + rewards))
            print(f"merged {len(kept)} runs of {sorted({r['reward'] for r in kept})} from {args.json}")
    summary = {}
    for reward in rewards:
        mine = [r for r in runs if r["reward"] == reward]
        summary[reward] = verdict({part: [r["diff"][part] for r in mine] for part in PARTS})
        summary[reward]["groups_without_signal_share"] = statistics.mean(r["groups_without_signal_share"] for r in mine)
    best = max(summary, key=lambda k: summary[k]["mean_held_out"])
    text = f"best of the rewards run ({', '.join(rewards)}): {best!r}, which {summary[best]['text']}"
    print("\n".join(f"{k}: {v['text']}" for k, v in summary.items()))
    print("VERDICT:", text)
    result = {"date": time.strftime("%Y-%m-%d"), "profile": "ci", "seeds": args.seeds, "rewards": rewards,
              "settings": base_settings.as_dict(), "target_held_out": TARGET_HELD_OUT,
              "start": {"drill_root": display_path(cfg.paths.data_dir.parent),
                        "sft_settings": sft_settings_of(cfg)},
              "pipeline_sft": sft,
              "runs": runs, "summary": {k: {kk: vv for kk, vv in v.items() if kk != "text"} | {"verdict": v["text"]}
                                        for k, v in summary.items()},
              "verdict": text, "seconds": round(time.monotonic() - t_all, 1)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
