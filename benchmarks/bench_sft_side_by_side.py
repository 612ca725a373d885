"""The drill's step 3 with the two SFT variants side by side vs one after the other (the peer).

Lesson 07's ci profile trains raw SFT and pipeline SFT at once, one process and one CPU thread each
(``drill.sft_parallel``). This runs step 3 both ways on the same data (steps 1–2 once, seed 0): first
one after the other with the profile's threads each, then side by side. It prints both times, the ratio
side by side / one after the other, and whether the two ways gave the same loss curves.

    PYTHONPATH=$PWD python benchmarks/bench_sft_side_by_side.py [--steps N] [--root DIR]

ci at the profile's 1,400 steps: about 11 minutes on 2 cores (2026-12-04: 331 s one after the other,
304 s side by side, ratio 0.92, the same loss curves). ``--steps 300`` gives the shape in 3 minutes.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from course_lib import drill
from course_lib.drill.outputs import DrillPaths, setup_logging


def timed_step_sft(cfg: drill.DrillConfig, parallel: bool) -> tuple[float, dict]:
    cfg = replace(cfg, sft_parallel=parallel, force=True)     # a copy: the run's settings are not changed
    t0 = time.monotonic()
    drill.step_sft(cfg)
    seconds = time.monotonic() - t0
    curves = {v: json.loads((cfg.paths.model_for(v) / "sft_result.json").read_text())["loss_history"]
              for v in cfg.trained_variants()}
    return seconds, curves


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=None, help="SFT steps per variant (default: the profile's)")
    ap.add_argument("--root", type=Path, default=None, help="the drill folder (default: a temporary one)")
    args = ap.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="bench_sft_"))
    cfg = drill.config_from_profile("ci", seed=0, compare_raw=True, paths=DrillPaths.under(root),
                                    sft_steps=args.steps)
    cfg.paths.make()
    setup_logging(cfg.paths.log_dir, quiet=True)
    drill.step_download(cfg)
    drill.step_pipeline(cfg)
    seq_s, seq_curves = timed_step_sft(cfg, parallel=False)
    par_s, par_curves = timed_step_sft(cfg, parallel=True)
    steps = cfg.sft_overrides["max_steps"]
    print(f"step 3, {steps} steps per variant, variants {cfg.trained_variants()}:")
    print(f"  one after the other (peer): {seq_s:7.1f} s")
    print(f"  side by side:               {par_s:7.1f} s")
    print(f"  ratio side by side / one after the other: {par_s / seq_s:.2f}")
    print("  loss curves:", "the same" if seq_curves == par_curves else "DIFFERENT (the thread count changed the numerics)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
