"""Benchmark of lesson 10's claim: does RL on the sandbox's reward beat pipeline SFT, beyond the noise?

For each seed, reward and group size K (issue 25: seeds 0, 1, 2; rewards ``pass``, ``fraction``, ``lecture``;
issue 35: K = 8 and 16) this runs the drill's step 6 training — :func:`course_lib.rl.train_grpo` from the ci
drill's ``pipeline_sft`` model on its training rows' prompts, the profile's RL settings with that seed, reward
and K — and then measures the trained model as step 5 measures every variant: greedy test pass@1 with the
task's signature given (:func:`course_lib.rl.greedy_test_pass1`, the drill's inference engine and judge), on
new instances, on held-out combinations and on each half of them. ``pipeline_sft`` is measured once the
same way.

**Which configuration is the default is chosen on a split that is never reported** (issue 35): the
selection split is ``--select-prompts`` training rows with hidden tests (a seeded sample of
``train_python.json``: the RL prompt pool, no eval prompt), on which every trained model is also measured
greedily; the configuration with the highest mean selection test pass@1 over seeds is the ``chosen`` one.
Its verdict on the eval parts is then reported as it comes out; the eval parts decide nothing.

Per configuration: RL − SFT on each eval scope from the per-prompt outcomes of every seed — the mean over
seeds, the 95 % paired bootstrap interval over seeds and prompts, McNemar's p
(:func:`course_lib.drill.scoreboard.paired_comparison`) — and a verdict against the issue's target: ahead by
>= 0.10 on held-out combinations in the mean over seeds **with the interval above 0**, and not behind on new
instances (the new-instances interval does not lie below 0).

Each run's per-prompt outcomes go beside the JSON: ``<json without .json>/seed<k>/<reward>_k<K>.jsonl`` and
``<json without .json>/pipeline_sft.jsonl`` (and ``select_…`` files for the selection split), named in the
JSON, so anyone can recompute the intervals (lesson 10 does).

pass@k (``--passk-prompts`` > 0): k = 1..K from K sampled answers per eval prompt
(:func:`course_lib.rl.sample_pass_at_k`) before (SFT) and after RL, per part — does RL raise pass@1 only
by sharpening the distribution, or does pass@K move too?

Usage::

    PYTHONPATH=$PWD python -m course_lib.drill --no-rl              # first: the ci drill's steps 1-5 (cached)
    PYTHONPATH=$PWD python benchmarks/bench_rl.py                   # 3 seeds x 3 rewards x K 8: 9 RL runs (long)
    PYTHONPATH=$PWD python benchmarks/bench_rl.py --rewards pass --group-sizes 8 16 --json benchmarks/results/bench_rl_k16.json
    PYTHONPATH=$PWD python benchmarks/bench_rl.py --rewards pass --group-sizes 8 16 --same-rollouts   # K 16 at 4 prompts x 16
    PYTHONPATH=$PWD python benchmarks/bench_rl.py --rewards pass --levers prefilter8 entropy0.2 \
        --no-plain --reuse benchmarks/results/bench_rl.json --json benchmarks/results/bench_rl_levers.json   # issue 35's levers
    PYTHONPATH=$PWD python benchmarks/bench_rl.py --toy --drill-root DIR --json /tmp/bench_rl_toy.json   # format check
    ... --json benchmarks/results/bench_rl.json  (the default; lesson 10 prints its verdict)

Each RL run costs one step-6 training (the profile's rl section: ~2.5-5 min on 2 cores in fp32) plus two
greedy evaluations (the eval set and the selection split, ~1-2 min each with vLLM) and, with pass@k, K samples
per chosen eval prompt.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from course_lib import drill
from course_lib.drill import scoreboard
from course_lib.drill.evaluate import read_per_prompt, write_per_prompt
from course_lib.drill.outputs import DrillPaths, read_json_output, setup_logging
from course_lib.paths import display_path
from course_lib.rl import REWARDS, greedy_test_pass1, rl_settings, sample_pass_at_k, train_grpo

PARTS = ("new instances", "held-out combinations")
SCOPES = scoreboard.SCOPES                       # both parts and both halves of the held-out part
TARGET_HELD_OUT = 0.10
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "bench_rl.json"
SELECT_PROMPTS = 200
# issue 35's levers: name -> RLSettings overrides (a config named pass_k8_prefilter8 is pass_k8 with the lever on)
LEVERS = {"prefilter8": {"prefilter_samples": 8},          # the KAT notes: 8 samples, all-pass/all-fail dropped
          "entropy0.2": {"top_entropy_quantile": 0.2}}     # TRL's top_entropy_quantile at the paper's value
TOY = {"steps": 2, "group_size": 2, "eval_rows": 24, "select_prompts": 8, "passk_prompts": 0}
FORMAT = ("per-prompt outcomes beside the JSON (paths relative to the JSON's folder); comparisons: scope -> the "
          "paired 95 % bootstrap interval over seeds and prompts (course_lib.drill.scoreboard.paired_comparison); "
          "the chosen configuration is picked on the selection split (training prompts), never on the eval parts")


def config_name(reward: str, group_size: int, prompts_per_step: int | None = None) -> str:
    """``pass_k8``; with another number of prompts per step than the profile's, ``pass_k16x4``."""
    return f"{reward}_k{group_size}" + (f"x{prompts_per_step}" if prompts_per_step else "")


def prompts_for(group_size: int, same_rollouts: bool) -> int | None:
    """Prompts per step for K = ``group_size``: the profile's (None), or with ``same_rollouts`` as many as keep
    the profile's rollouts per step (8 prompts x K 8 = 64: K 16 → 4 prompts; issue 35's lever)."""
    base = rl_settings("ci")
    if not same_rollouts or group_size == base.group_size:
        return None
    return max(1, base.rollouts_per_step // group_size)


def per_prompt_dir(json_path: Path) -> Path:
    """Where the per-prompt files of ``json_path`` live: beside it, in a folder of its name."""
    return json_path.with_suffix("")


def selection_rows(train: list[dict], n: int, seed: int = 0) -> list[dict]:
    """The selection split: ``n`` training rows with hidden tests, a seeded sample (as eval rows: their
    ``eval_part`` is "selection"), sorted by idx."""
    rows = sorted((r for r in train if r.get("tests")), key=lambda r: int(r["idx"]))
    picked = random.Random(seed).sample(rows, min(n, len(rows)))
    return [{**r, "eval_part": "selection"} for r in sorted(picked, key=lambda r: int(r["idx"]))]


def measure(model: str, evals: list, select: list, settings, passk_prompts: int, save_to: dict[str, Path],
            base_dir: Path) -> dict:
    """Greedy test pass@1 on the eval rows and on the selection split, their per-prompt files written to
    ``save_to["eval"]`` / ``save_to["select"]`` (paths in the result relative to ``base_dir``), pass@k."""
    t0 = time.monotonic()
    res = greedy_test_pass1(model, evals, profile="ci")
    sel = greedy_test_pass1(model, select, profile="ci") if select else None
    out = {"test pass@1": {p: res[p] for p in (*PARTS, *(s for s in SCOPES if s.startswith("held-out: "))) if p in res},
           "per_prompt": {}}
    write_per_prompt(res["per_prompt"], save_to["eval"])
    out["per_prompt"]["eval"] = save_to["eval"].relative_to(base_dir).as_posix()
    if sel is not None:
        passed = [r["passed"] for r in sel["per_prompt"] if r["passed"] is not None]
        out["selection test pass@1"] = sum(passed) / len(passed) if passed else None
        write_per_prompt(sel["per_prompt"], save_to["select"])
        out["per_prompt"]["select"] = save_to["select"].relative_to(base_dir).as_posix()
    if passk_prompts:
        pk = sample_pass_at_k(model, evals, settings, limit_per_part=passk_prompts)
        out["pass@k"] = {part: [res_[f"pass@{k}"] for k in range(1, pk["n"] + 1)] for part, res_ in pk["parts"].items()}
    out["eval_seconds"] = round(time.monotonic() - t0, 1)
    return out


def sft_settings_of(cfg) -> dict:
    """The SFT settings pipeline_sft was trained with (bf16, max_steps, seed ...), from its step-3 marker."""
    marker = Path(str(cfg.paths.model_record("pipeline_sft")) + ".done.json")
    conf = json.loads(marker.read_text(encoding="utf-8")).get("config", {}) if marker.exists() else {}
    keys = ("bf16", "max_steps", "per_device_train_batch_size", "learning_rate", "seed")
    return {k: {**conf.get("settings", {}), **conf.get("overrides", {})}.get(k) for k in keys}


def compare_runs(runs: list[dict], sft: dict, base_dir: Path) -> dict[str, dict]:
    """RL − SFT on every eval scope, paired seed by seed (the same SFT outcomes for every seed)."""
    a = [read_per_prompt(base_dir / r["rl"]["per_prompt"]["eval"]) for r in runs]
    b = [read_per_prompt(base_dir / sft["per_prompt"]["eval"]) for _ in runs]
    return scoreboard.compare_variants({"rl": a, "pipeline_sft": b}, "rl", "pipeline_sft",
                                       tuple(f"test pass@1 ({s})" for s in SCOPES))


def verdict(comparisons: dict[str, dict]) -> dict:
    """The issue's target from the paired intervals: held-out combinations ahead by >= 0.10 in the mean over
    seeds with the 95 % interval above 0, and the new-instances interval not below 0."""
    held, new = comparisons["test pass@1 (held-out combinations)"], comparisons["test pass@1 (new instances)"]
    ok = held["diff"] >= TARGET_HELD_OUT and held["low"] > 0 and new["high"] >= 0
    why = f"held-out {held['verdict'].split(': ', 1)[1]}; new instances {new['verdict'].split(': ', 1)[1]}"
    return {"mean_held_out": held["diff"], "held_out_ci95": [held["low"], held["high"]], "mean_new": new["diff"],
            "new_ci95": [new["low"], new["high"]], "meets_target": ok,
            "text": ("meets" if ok else "misses") + f" the target (+{TARGET_HELD_OUT:.2f} held-out with the 95 % "
                                                    f"interval above 0, new instances not behind): {why}"}


def reused_runs(path: Path, configs: list[str], sft: dict, base_dir: Path) -> list[dict]:
    """The runs of ``configs`` from an earlier result ``path``, their per-prompt paths made relative to
    ``base_dir``; refused unless that result's pipeline_sft answered every eval prompt as this run's did (the
    same start model and eval set), so the reused runs pair with the new ones."""
    import os

    old = json.loads(path.read_text(encoding="utf-8"))
    old_base = path.resolve().parent

    def outcomes(rel: str, base: Path) -> list[tuple]:
        return [(r["id"], r["passed"]) for r in read_per_prompt(base / rel)]

    if outcomes(old["pipeline_sft"]["per_prompt"]["eval"], old_base) != \
            outcomes(sft["per_prompt"]["eval"], base_dir):
        raise SystemExit(f"--reuse {path}: its pipeline_sft answered the eval prompts differently from this run's "
                         "(another start model or eval set): its runs cannot be paired with these; rerun them")
    out = []
    for r in old["runs"]:
        if r["config"] in configs:
            pp = {k: os.path.relpath(old_base / v, base_dir) for k, v in r["rl"]["per_prompt"].items()}
            out.append({**r, "rl": {**r["rl"], "per_prompt": pp}, "reused_from": display_path(path)})
    return out


def summarise(runs: list[dict], sft: dict, base_dir: Path, select_prompts: int) -> tuple[dict, str, str]:
    """Per configuration: RL − SFT with its intervals and the verdict, the mean selection test pass@1, the share of
    groups without signal and, for a lever, the lever against its configuration without it (seed by seed); then the
    chosen configuration (:func:`choose`) and the benchmark's verdict line. Prints them."""
    summary: dict[str, dict] = {}
    names = list(dict.fromkeys(r["config"] for r in runs))
    for name in names:
        mine = [r for r in runs if r["config"] == name]
        comps = compare_runs(mine, sft, base_dir)
        sel = [r["rl"].get("selection test pass@1") for r in mine]
        summary[name] = {**verdict(comps), "selection test pass@1": (sum(sel) / len(sel)) if None not in sel else None,
                         "groups_without_signal_share": sum(r["groups_without_signal_share"] for r in mine) / len(mine),
                         "comparisons": comps}
    for name in names:                 # a lever against its configuration without it, seed by seed
        plain = name.rsplit("_", 1)[0] if any(name.endswith(f"_{lv}") for lv in LEVERS) else None
        if plain in summary:
            by_seed = {r["seed"]: r for r in runs if r["config"] == plain}
            mine = [r for r in runs if r["config"] == name and r["seed"] in by_seed]
            a = [read_per_prompt(base_dir / r["rl"]["per_prompt"]["eval"]) for r in mine]
            b = [read_per_prompt(base_dir / by_seed[r["seed"]]["rl"]["per_prompt"]["eval"]) for r in mine]
            summary[name]["against"] = {"config": plain, "comparisons": scoreboard.compare_variants(
                {name: a, plain: b}, name, plain, tuple(f"test pass@1 ({sc})" for sc in SCOPES))}
    chosen, why = choose(summary, runs, base_dir)
    text = (f"chosen on the selection split ({select_prompts} training prompts, never an eval prompt): {chosen!r} "
            f"({why}), which {summary[chosen]['text']}")
    print("\n".join(f"{k}: {v['text']}" for k, v in summary.items()))
    print("VERDICT:", text)
    for name, v in summary.items():
        if "against" in v:
            held = v["against"]["comparisons"]["test pass@1 (held-out combinations)"]
            new_ = v["against"]["comparisons"]["test pass@1 (new instances)"]
            print(f"{name} - {v['against']['config']}: held-out {held['diff']:+.3f} [{held['low']:+.3f}, "
                  f"{held['high']:+.3f}], new instances {new_['diff']:+.3f} [{new_['low']:+.3f}, {new_['high']:+.3f}]")
    return summary, chosen, text


def choose(summary: dict, runs: list[dict], base_dir: Path, incumbent: str | None = None) -> tuple[str, str]:
    """The configuration the profile should use, decided on the selection split alone: the highest mean selection
    test pass@1 over seeds — unless the profile's own configuration (``incumbent``, default ``pass_k8``) is tied
    with it: the paired 95 % interval of best − incumbent on the selection split (seeds × prompts) includes 0.
    Then the profile keeps its configuration (a new default needs evidence). Returns ``(chosen, why)``."""
    base = rl_settings("ci")
    incumbent = incumbent or config_name(base.reward, base.group_size)
    ranked = [n for n in summary if summary[n]["selection test pass@1"] is not None]
    if not ranked:
        return next(iter(summary)), "no selection split measured"
    best = max(ranked, key=lambda n: summary[n]["selection test pass@1"])
    top = f"selection test pass@1 {summary[best]['selection test pass@1']:.3f}"
    if best == incumbent or incumbent not in ranked:
        return best, f"the highest {top}"
    by_seed = {r["seed"]: r for r in runs if r["config"] == incumbent and r["rl"]["per_prompt"].get("select")}
    mine = [r for r in runs if r["config"] == best and r["seed"] in by_seed and r["rl"]["per_prompt"].get("select")]
    if not mine:
        return best, f"the highest {top} (no paired selection outcomes of {incumbent!r} to compare)"
    a = [read_per_prompt(base_dir / r["rl"]["per_prompt"]["select"]) for r in mine]
    b = [read_per_prompt(base_dir / by_seed[r["seed"]]["rl"]["per_prompt"]["select"]) for r in mine]
    c = scoreboard.paired_comparison(a, b, "test pass@1", best, incumbent)
    gap = f"{c['diff']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]"
    if c["low"] <= 0:
        return incumbent, (f"{best!r} has the highest {top}, {gap} over the profile's {incumbent!r} on the selection "
                           "split: a tie, so the profile's configuration stays")
    return best, f"the highest {top}, ahead of the profile's {incumbent!r} on the selection split by {gap}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--rewards", nargs="+", choices=REWARDS, default=list(REWARDS))
    p.add_argument("--group-sizes", type=int, nargs="+", default=None,
                   help="K rollouts per prompt to compare (default: the profile's, 8)")
    p.add_argument("--group-size", type=int, default=None, help=argparse.SUPPRESS)   # one K (older command lines)
    p.add_argument("--same-rollouts", action="store_true",
                   help="a K other than the profile's trains on fewer or more prompts per step, so every K "
                        "samples the profile's rollouts per step (8 x 8 = 64: K 16 → 4 prompts x 16)")
    p.add_argument("--steps", type=int, default=None, help="RL steps (default: the profile's)")
    p.add_argument("--passk-prompts", type=int, default=10, help="eval prompts per part for pass@k (0: none)")
    p.add_argument("--select-prompts", type=int, default=SELECT_PROMPTS,
                   help="training prompts of the selection split that picks the chosen configuration")
    p.add_argument("--eval-rows", type=int, default=None, help="use only N eval rows, half from each part (toy runs)")
    p.add_argument("--toy", action="store_true", help=f"a format check ({TOY}), never a verdict: needs a --json "
                                                      "outside benchmarks/results")
    p.add_argument("--out", type=Path, default=None, help="where the RL runs go (default: <drill root>/bench_rl)")
    p.add_argument("--drill-root", type=Path, default=None,
                   help="the ci drill's folder whose pipeline_sft RL starts from (default: the course cache's "
                        "drill/ci), e.g. a seed folder of bench_drill_pipeline.py: .cache/course/drill/"
                        "bench_drill_pipeline/fp32/seed0")
    p.add_argument("--levers", nargs="+", choices=sorted(LEVERS), default=[],
                   help="also run each configuration with these levers on (issue 35): " +
                        "; ".join(f"{k}: {v}" for k, v in LEVERS.items()))
    p.add_argument("--no-plain", action="store_true", help="with --levers: run only the lever configurations")
    p.add_argument("--reuse", type=Path, nargs="+", default=[],
                   help="result JSONs of this benchmark whose runs join this one (not trained again): their pipeline_sft "
                        "per-prompt outcomes must equal this run's (the same start model); --reuse-configs picks them")
    p.add_argument("--reuse-configs", nargs="+", default=["pass_k8"])
    p.add_argument("--resummarise", action="store_true",
                   help="train nothing: recompute --json's summary, chosen configuration and verdict from its runs and "
                        "per-prompt files, and write it back")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    if args.resummarise:
        old = json.loads(args.json.read_text(encoding="utf-8"))
        summary, chosen, text = summarise(old["runs"], old["pipeline_sft"], args.json.parent,
                                          old["selection"]["prompts"])
        old.update(summary={k: {kk: vv for kk, vv in v.items() if kk != "text"} | {"verdict": v["text"]}
                            for k, v in summary.items()}, chosen=chosen, verdict=text)
        old["selection"]["chosen"] = chosen
        args.json.write_text(json.dumps(old, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
        return 0
    if args.toy:
        if args.json.resolve().parent == DEFAULT_JSON.parent:
            raise SystemExit("--toy writes a toy result: give it a --json outside benchmarks/results")
        args.steps, args.group_sizes = TOY["steps"], [TOY["group_size"]]
        args.eval_rows, args.select_prompts, args.passk_prompts = TOY["eval_rows"], TOY["select_prompts"], 0
    group_sizes = args.group_sizes or ([args.group_size] if args.group_size else [rl_settings("ci").group_size])

    cfg = drill.config_from_profile("ci", paths=DrillPaths.under(args.drill_root) if args.drill_root else None)
    setup_logging(cfg.paths.log_dir, quiet=True)
    problems = drill.check_prerequisites(cfg, ["rl"])
    if problems:
        print("run the ci drill first (`python -m course_lib.drill --no-rl`):\n  - " + "\n  - ".join(problems))
        return 1
    start = drill.model_path_for(cfg, "pipeline_sft")
    rows = read_json_output(cfg.paths.codegen_json, "pipeline")
    train = read_json_output(cfg.paths.train_json, "download")
    hidden = {int(r["idx"]): r for r in train if r.get("tests")}
    evals = read_json_output(cfg.paths.eval_json, "download")
    if args.eval_rows:   # the first rows of each part, half and half
        evals = [r for part in PARTS for r in [x for x in evals if x.get("eval_part") == part][: args.eval_rows // 2]]
    select = selection_rows(train, args.select_prompts)
    out_root = args.out or cfg.paths.data_dir.parent / ("bench_rl_toy" if args.toy else "bench_rl")
    files, base_dir = per_prompt_dir(args.json), args.json.parent
    t_all = time.monotonic()
    base_settings = rl_settings("ci", steps=args.steps, group_size=group_sizes[0])
    sft = measure(start, evals, select, base_settings, args.passk_prompts,
                  {"eval": files / "pipeline_sft.jsonl", "select": files / "select_pipeline_sft.jsonl"}, base_dir)
    print(f"pipeline SFT: test pass@1 {sft['test pass@1']}, selection {sft.get('selection test pass@1')}", flush=True)
    runs: list[dict] = []
    for path in args.reuse:        # the first file that has a (configuration, seed) gives it
        runs += [r for r in reused_runs(path, args.reuse_configs, sft, base_dir)
                 if not any((x["config"], x["seed"]) == (r["config"], r["seed"]) for x in runs)]
    variants = ([] if args.no_plain and args.levers else [None]) + list(args.levers)
    for k in group_sizes:
        prompts = prompts_for(k, args.same_rollouts)
        for reward in args.rewards:
            for lever, seed in ((lv, sd) for lv in variants for sd in args.seeds):
                name = config_name(reward, k, prompts) + (f"_{lever}" if lever else "")
                if any(r["config"] == name and r["seed"] == seed for r in runs):
                    continue                       # reused from --reuse
                s = rl_settings("ci", steps=args.steps, group_size=k, reward=reward, seed=seed,
                                prompts_per_step=prompts, **(LEVERS[lever] if lever else {}))
                res = train_grpo(start, rows, hidden, out_root / f"{name}_seed{seed}", s, log=lambda m: None)
                log = json.loads(Path(res["train_log"]).read_text())
                after = measure(res["model_path"], evals, select, s, args.passk_prompts,
                                {"eval": files / f"seed{seed}" / f"{name}.jsonl",
                                 "select": files / f"seed{seed}" / f"select_{name}.jsonl"}, base_dir)
                diff = {part: after["test pass@1"][part] - sft["test pass@1"][part] for part in after["test pass@1"]}
                no_signal = sum(r["groups_without_signal"] for r in log) / max(1, sum(r.get("groups", 0) for r in log))
                pre = res.get("prefilter")
                runs.append({"config": name, "reward": reward, "group_size": k, "seed": seed, "lever": lever,
                             "prompts_per_step": s.prompts_per_step, "prefilter": pre,
                             "train_seconds": res["seconds"], "steps": res["steps"], "rl": after, "diff": diff,
                             "groups_without_signal_share": no_signal,
                             "rollout_pass_rate_first_last": [log[0]["pass_rate"], log[-1]["pass_rate"]]})
                print(f"{name:<12} seed {seed}: RL test pass@1 {after['test pass@1']}, selection "
                      f"{after.get('selection test pass@1')}; {res['seconds']:.0f} s training"
                      + (f" + {pre['seconds']:.0f} s prefilter ({pre['kept']} of {pre['sampled_prompts']} sampled "
                         f"prompts kept, {pre['all_pass']} all pass, {pre['all_fail']} all fail)" if pre else "")
                      + f"; {no_signal:.0%} groups without signal", flush=True)
    summary, chosen, text = summarise(runs, sft, base_dir, len(select))
    result = {"date": time.strftime("%Y-%m-%d"), "profile": "ci", "toy": args.toy, "format": FORMAT,
              "levers": {k: LEVERS[k] for k in args.levers},
              "reused": {"json": [display_path(x) for x in args.reuse], "configs": args.reuse_configs} if args.reuse else None,
              "seeds": args.seeds, "rewards": list(args.rewards), "group_sizes": group_sizes,
              "same_rollouts": args.same_rollouts,
              "settings": base_settings.as_dict(), "target_held_out": TARGET_HELD_OUT,
              "selection": {"split": "training prompts with hidden tests (train_python.json), seeded sample",
                            "prompts": len(select), "chosen": chosen},
              "eval_rows": len(evals),
              "start": {"drill_root": display_path(cfg.paths.data_dir.parent), "sft_settings": sft_settings_of(cfg)},
              "pipeline_sft": sft, "runs": runs,
              "summary": {k: {kk: vv for kk, vv in v.items() if kk != "text"} | {"verdict": v["text"]}
                          for k, v in summary.items()},
              "chosen": chosen, "verdict": text, "seconds": round(time.monotonic() - t_all, 1)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {args.json} and the per-prompt files under {files}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
