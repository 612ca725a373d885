"""Benchmark of lesson 11's question (issue 38): does the course's tiny model learn the drill's tasks in C++ as it
does in Python, from the same pipeline and the same number of SFT steps?

Runs the drill (steps 1-5: download → LazyLLM pipeline with the rule teacher → raw SFT and pipeline SFT → inference →
sandboxed evaluation) in Python and in C++ (``--language cpp``: the same task families rendered in C++17,
```` ```cpp ```` fences, the compile-and-run judge) at the same sizes and seed, each in its own folder, and prints per
language and variant FCR, SER (C++: compile errors), RSR, Pass@1 and test pass@1 on both eval parts. Then C++ −
Python per variant on test pass@1, paired by eval row when both languages evaluated the same rows (the C++ sample
renders the same tasks with the same ids), with the 95 % paired bootstrap interval over seeds and prompts
(:func:`course_lib.drill.scoreboard.paired_comparison`); otherwise the two means only.

The tiny model (lesson 04) is pretrained on Python files only, so whatever C++ it writes after SFT comes from the
drill's SFT rows: this benchmark measures that, not a C++-pretrained model (not built; see docs/drill.md, "C++").

Usage::

    PYTHONPATH=$PWD python benchmarks/bench_drill_languages.py          # seed 0, issue 38's sizes (~15 min, 2 cores)
    ... --seeds 0 1 --train-size 200 --eval-size 60 --sft-steps 300 --json benchmarks/results/bench_drill_languages.json
    ... --read python=.cache/course/drill/ci cpp=DIR --json benchmarks/results/bench_drill_languages_ci.json
        (two drills that already ran at the profile's sizes, e.g. `python -m course_lib.drill --language cpp --no-rl
        --root DIR`: compared, nothing trained)

Each run's per-prompt outcomes are copied beside the JSON (``<json without .json>/<language>/seed<k>/<variant>.jsonl``).
A rerun with the same settings reads the drill's cache (its ``seconds`` are then the cache's, not a training's;
``step_seconds`` are those of the run that trained); for times from a clean cache delete ``--root`` first.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from course_lib import drill
from course_lib.drill import scoreboard
from course_lib.drill.config import default_root
from course_lib.drill.outputs import DrillPaths, setup_logging
from course_lib.paths import display_path

LANGUAGES = ("python", "cpp")
VARIANTS = ("base", "raw_sft", "pipeline_sft")
KEYS = ("FCR", "SER", "RSR", "Pass@1", "closed-fence rate", "test pass@1 (new instances)",
        "test pass@1 (held-out combinations)", "test pass@1 (free answer)")
COMPARED = ("test pass@1 (new instances)", "test pass@1 (held-out combinations)")
SIZES = {"train_size": 200, "eval_size": 60, "sft_steps": 300}       # issue 38's proposed C++ drill
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "bench_drill_languages.json"


def run_one(language: str, seed: int, sizes: dict, root: Path, per_prompt_to: Path, read_from: Path | None = None) -> dict:
    """One drill's steps 1-5 in ``language`` at ``sizes`` under ``root`` — or, with ``read_from``, the results of a
    drill that already ran there (its own sizes and settings, read from its run manifest; nothing is trained)."""
    if read_from is not None:
        cfg = drill.config_from_profile("ci", seed=seed, language=language, paths=DrillPaths.under(read_from))
    else:
        cfg = drill.config_from_profile("ci", seed=seed, language=language, compare_raw=True, use_rl=False,
                                        humaneval_subset=0, sft_steps=sizes["sft_steps"],
                                        train_size=sizes["train_size"], eval_size=sizes["eval_size"],
                                        paths=DrillPaths.under(root / language / f"seed{seed}"))
        cfg.sft_overrides = {**cfg.sft_overrides, "seed": seed, "bf16": False}
        cfg.paths.make()
        setup_logging(cfg.paths.log_dir, quiet=True)
    t0, c0 = time.monotonic(), os.times()
    if read_from is None:
        drill.run_drill(cfg)
    c1 = os.times()
    m = drill.load_metrics(cfg)
    if not m:
        raise SystemExit(f"{language}: no evaluated variant in {display_path(cfg.paths.output_dir)}")
    manifest = json.loads((cfg.paths.output_dir / "run_manifest.json").read_text(encoding="utf-8"))
    where = scoreboard.save_benchmark_per_prompt(cfg, [v for v in VARIANTS if v in m],
                                                 per_prompt_to / language / f"seed{seed}", per_prompt_to.parent)
    if read_from is not None:
        return {"language": language, "seed": seed, "per_prompt": where, "read_from": display_path(read_from),
                "step_seconds": {k: s.get("seconds") for k, s in manifest["steps"].items()},
                "settings": _settings_of(cfg),
                "metrics": {v: {k: m[v].get(k) for k in KEYS} for v in VARIANTS if v in m}}
    return {"language": language, "seed": seed, "per_prompt": where, "seconds": round(time.monotonic() - t0, 1),
            "cpu_seconds": round(c1.user + c1.system + c1.children_user + c1.children_system
                                 - c0.user - c0.system - c0.children_user - c0.children_system, 1),
            "settings": _settings_of(cfg),
            "step_seconds": {k: s.get("seconds") for k, s in manifest["steps"].items()},
            "metrics": {v: {k: m[v].get(k) for k in KEYS} for v in VARIANTS if v in m}}


def _settings_of(cfg) -> dict:
    """The sizes and SFT steps a drill ran with, from its completion markers (what step 1 and step 3 recorded)."""
    def marker(path: Path) -> dict:
        done = Path(str(path) + ".done.json")
        return json.loads(done.read_text(encoding="utf-8")).get("config", {}) if done.exists() else {}

    data = marker(cfg.paths.train_json)
    sft = marker(cfg.paths.model_record("pipeline_sft"))
    return {"train_size": data.get("train_size"), "eval_size": data.get("eval_size"), "seed": data.get("seed"),
            "sft_max_steps": (sft.get("settings") or {}).get("max_steps"), "sft_bf16": (sft.get("settings") or {}).get("bf16")}


def compare_languages(results: list[dict], base_dir: Path) -> dict[str, dict]:
    """C++ − Python per variant on :data:`COMPARED`, paired by eval row id seed by seed; a variant whose two
    languages evaluated different rows gets ``{"unpaired": why}``."""
    out: dict[str, dict] = {}
    seeds = sorted({r["seed"] for r in results})
    for v in VARIANTS:
        runs = {lang: [r for s in seeds for r in results if r["language"] == lang and r["seed"] == s
                       and v in r["per_prompt"]] for lang in LANGUAGES}
        if len(runs["cpp"]) != len(seeds) or len(runs["python"]) != len(seeds):
            continue
        a = scoreboard.benchmark_per_prompt(runs["cpp"], v, base_dir)
        b = scoreboard.benchmark_per_prompt(runs["python"], v, base_dir)
        try:
            out[v] = scoreboard.compare_variants({"C++": a, "Python": b}, "C++", "Python", COMPARED)
        except ValueError as exc:
            out[v] = {"unpaired": str(exc)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--languages", nargs="+", choices=LANGUAGES, default=list(LANGUAGES))
    p.add_argument("--train-size", type=int, default=SIZES["train_size"])
    p.add_argument("--eval-size", type=int, default=SIZES["eval_size"])
    p.add_argument("--sft-steps", type=int, default=SIZES["sft_steps"])
    p.add_argument("--root", type=Path, default=None, help="the drill folders (default: <cache>/drill/bench_drill_languages)")
    p.add_argument("--read", nargs="+", default=[], metavar="LANGUAGE=DIR",
                   help="train nothing for LANGUAGE: read the drill that already ran in DIR (e.g. the ci drill, "
                        "python=.cache/course/drill/ci; its sizes are its own, from its run manifest)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    read = {}
    for item in args.read:
        lang, _, folder = item.partition("=")
        if lang not in LANGUAGES or not folder:
            raise SystemExit(f"--read {item!r}: expected LANGUAGE=DIR with LANGUAGE one of {LANGUAGES}")
        read[lang] = Path(folder)
    sizes = {"train_size": args.train_size, "eval_size": args.eval_size, "sft_steps": args.sft_steps}
    root = args.root or default_root("ci").parent / "bench_drill_languages"
    files, base_dir = args.json.with_suffix(""), args.json.parent
    results = []
    for seed in args.seeds:
        for lang in args.languages:
            res = run_one(lang, seed, sizes, root, files, read.get(lang))
            results.append(res)
            how = f"read from {res['read_from']}" if "read_from" in res else f"{res['seconds']:.0f} s"
            print(f"{lang:<6} seed {seed}: {how} (steps: {res['step_seconds']})", flush=True)
            for v, vals in res["metrics"].items():
                print(f"  {v:<13}" + "  ".join(f"{k} {vals[k]:.3f}" for k in KEYS if vals.get(k) is not None),
                      flush=True)
    comps = compare_languages(results, base_dir)
    for v, c in comps.items():
        for metric, res in c.items():
            if metric == "unpaired":
                print(f"{v}: not paired ({res})")
            else:
                print(f"{v}: C++ - Python on {metric}: {res['diff']:+.3f} [{res['low']:+.3f}, {res['high']:+.3f}] - "
                      f"{res['verdict']}")
    result = {"date": time.strftime("%Y-%m-%d"), "profile": "ci", "seeds": args.seeds,
              "sizes": sizes if not read else "each drill's own (results[i].settings)",
              "cpu": _cpu(), "precision": "fp32", "root": display_path(root),
              "format": "per-prompt outcomes beside the JSON (results[i].per_prompt: variant -> path relative to the "
                        "JSON's folder); comparisons: variant -> metric -> C++ - Python, paired by eval row id "
                        "(course_lib.drill.scoreboard.paired_comparison)",
              "results": results, "comparisons": comps}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                flags = open("/proc/cpuinfo", encoding="utf-8").read()
                return line.split(":", 1)[1].strip() + (" AVX-512 BF16" if "avx512_bf16" in flags else
                                                        " AVX2" if "avx2" in flags else "")
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
