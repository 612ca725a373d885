"""Dependency-ordered vs shuffled files within repositories: loss on the later files of held-out repositories.

Lesson 03 argues P(repo) = prod_i P(f_i | f_<i): concatenating a repository in dependency order puts
each file's imports in its context. For each seed this runs ``tinymodel.dependency_order_experiment``:
the course's ``base`` model continues pretraining on the training repositories twice, with the files
of every repository in dependency order or shuffled (same files, steps and seed otherwise), then both
copies are scored on the later half of the files of held-out repositories read in dependency order.
It prints one row per seed and the mean and standard deviation of ``shuffled - dependency``
(positive: dependency order gives the lower loss).

    PYTHONPATH=$PWD python benchmarks/bench_dependency_order.py [--profile ci] [--seeds 0 1 2] \
        [--json benchmarks/results/bench_dependency_order.json]

Lesson 04 prints the recorded result (``--json``, with the corpus fingerprint it was measured on)
beside its single run.

ci: about 35 s a seed on 2 cores once the base model is cached (``./course model`` builds it).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from course_lib.profiles import get_profile
from course_lib.training import tinymodel


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="ci")
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="seeds to run (default: 0 .. dependency_order.seeds - 1 of the profile)")
    p.add_argument("--json", default=None, help="also write the per-seed results to this file")
    args = p.parse_args(argv)
    seeds = args.seeds if args.seeds is not None else list(range(get_profile(args.profile).dependency_order.seeds))
    if len(seeds) < 3:
        p.error("the spread needs at least 3 seeds")
    tinymodel.get_tiny_model("base", args.profile)   # build it first, outside the timings
    rows = []
    print(f"{'seed':>4} {'before':>8} {'dependency':>11} {'shuffled':>9} {'difference':>11} {'seconds':>8}")
    for seed in seeds:
        t0 = time.time()
        r = tinymodel.dependency_order_experiment(args.profile, seed=seed)
        rows.append({"seed": seed, "before": r["before"]["later"], "dependency": r["dependency"]["later"],
                     "shuffled": r["shuffled"]["later"], "difference": r["difference"],
                     "seconds": round(time.time() - t0, 1)})
        row = rows[-1]
        print(f"{seed:>4} {row['before']:>8.4f} {row['dependency']:>11.4f} {row['shuffled']:>9.4f} "
              f"{row['difference']:>+11.4f} {row['seconds']:>8.1f}", flush=True)
    diffs = [r["difference"] for r in rows]
    summary = {"profile": args.profile, "date": time.strftime("%Y-%m-%d"),
               "corpus_fingerprint": tinymodel.pretraining_corpus(args.profile).info["fingerprint"],
               "base_model": tinymodel.get_tiny_model("base", args.profile).name,
               "seeds": seeds, "mean_difference": statistics.mean(diffs),
               "stdev_difference": statistics.stdev(diffs), "positive": sum(d > 0 for d in diffs),
               "settings": dict(get_profile(args.profile).dependency_order), "runs": rows}
    print(f"later-file loss, shuffled - dependency (nats/token): mean {summary['mean_difference']:+.4f}, "
          f"stdev {summary['stdev_difference']:.4f} over {len(seeds)} seeds; dependency order lower in "
          f"{summary['positive']} of {len(seeds)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=1)
    return summary


if __name__ == "__main__":
    main()
