"""``python -m course_lib.rl setup | status | train | eval``: the RL step outside the drill.

* ``setup [--force]`` — create the TRL environment (:func:`course_lib.rl.trl_env.ensure_trl_venv`);
* ``status`` — whether it imports TRL, and its versions;
* ``train`` — :func:`course_lib.rl.train_grpo` on a finished drill run's pipeline-SFT model and
  training rows (``--drill-root``: the drill's folder, default the ci drill in the course cache); its
  outputs go to ``<drill-root>/output/rl_cli`` (``--out``), never over the drill's step-6 log
  (``<drill-root>/output/rl/train_log.json``: an ``--out`` that would overwrite it is refused);
* ``eval --model DIR`` — :func:`course_lib.rl.greedy_test_pass1` and :func:`course_lib.rl.sample_pass_at_k`
  on the drill's eval rows.

Introduced in lesson 10.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from course_lib.rl.settings import REWARDS, rl_settings
from course_lib.rl.trl_env import TRL_FULL_EXTRA


def drill_inputs(root: Path) -> dict:
    """The pipeline-SFT model, its training rows, the hidden tests and the eval rows of a drill run. The
    hidden tests RL rewards from are the *training* rows' only: a row whose ``idx`` is an evaluation row's
    is left out, so no RL prompt or reward ever comes from an evaluation row. Introduced in lesson 10."""
    from course_lib.drill.outputs import DrillPaths, read_json_output

    paths = DrillPaths.under(root)
    sft = read_json_output(paths.model_for("pipeline_sft") / "sft_result.json", "sft")
    train = read_json_output(paths.train_json, "download")
    eval_rows = read_json_output(paths.eval_json, "download")
    eval_keys = {str(r.get("idx")) for r in eval_rows if r.get("idx") is not None}
    return {"model": sft["model_path"], "rows": read_json_output(paths.codegen_json, "pipeline"),
            "hidden_tests": {int(r["idx"]): r for r in train if r.get("tests") and str(r["idx"]) not in eval_keys},
            "eval_rows": eval_rows}


def step6_log(root: Path) -> Path:
    """The drill's step-6 ``train_log.json`` under a drill folder ``root``. Introduced in lesson 10."""
    from course_lib.drill.outputs import DrillPaths

    return DrillPaths.under(root).output_for("rl") / "train_log.json"


def cli_train_dir(root: Path, out: Path | None) -> Path | None:
    """Where ``train`` writes (``out``, default ``<root>/output/rl_cli``); None when its ``train_log.json``
    or ``rl_result.json`` would be the drill's step-6 files. Introduced in lesson 10."""
    out = Path(out) if out is not None else Path(root) / "output" / "rl_cli"
    drill_dir = step6_log(root).parent.resolve()
    return None if out.resolve() == drill_dir else out


def main(argv: list[str] | None = None) -> int:
    from course_lib.paths import cache_dir

    p = argparse.ArgumentParser(prog="python -m course_lib.rl", description="the RL step (TRL GRPO, sandbox rewards)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="create .venv-trl when missing or broken (a quick import check otherwise)")
    s.add_argument("--force", action="store_true")
    s.add_argument("--full", action="store_true",
                   help=f"also install {' '.join(TRL_FULL_EXTRA)}: TRL's vLLM generation for the full profile on a GPU")
    sub.add_parser("status", help="does the TRL environment import trl, and which versions")
    for name in ("train", "eval"):
        t = sub.add_parser(name)
        t.add_argument("--profile", default="ci")
        t.add_argument("--drill-root", type=Path, default=None, help="the drill's folder (default: <cache>/drill/<profile>)")
        t.add_argument("--out", type=Path, default=None,
                       help="output folder (train: default <drill-root>/output/rl_cli; never the drill's output/rl)")
        t.add_argument("--json", type=Path, default=None, help="also write the result here")
        t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="an RLSettings value (JSON literal), e.g. --set learning_rate=2e-4")
    sub.choices["train"].add_argument("--steps", type=int)
    sub.choices["train"].add_argument("--group-size", type=int)
    sub.choices["train"].add_argument("--reward", choices=REWARDS)
    sub.choices["train"].add_argument("--seed", type=int)
    e = sub.choices["eval"]
    e.add_argument("--model", required=True, help="a model folder, or 'pipeline_sft' for the drill's")
    e.add_argument("--no-greedy", action="store_true")
    e.add_argument("--no-passk", action="store_true")
    e.add_argument("--passk-limit", type=int, default=None, help="eval prompts per part for pass@k")
    args = p.parse_args(argv)

    from course_lib.rl import trl_env
    if args.cmd == "setup":
        try:
            trl_env.ensure_trl_venv(force=args.force, extra=trl_env.TRL_FULL_EXTRA if args.full else ())
        except (RuntimeError, OSError) as exc:
            print(f"TRL setup failed: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.cmd == "status":
        print(json.dumps({**trl_env.trl_status(), "python": trl_env.trl_python()[0]}, indent=1))
        return 0

    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    if args.cmd == "train":
        overrides.update(steps=args.steps, group_size=args.group_size, reward=args.reward, seed=args.seed)
    settings = rl_settings(args.profile, **overrides)
    root = args.drill_root or cache_dir("drill", args.profile)
    inputs = drill_inputs(root)
    if args.cmd == "train":
        from course_lib.rl.trainer import train_grpo

        out = cli_train_dir(root, args.out)
        if out is None:
            print(f"--out {args.out} would overwrite the drill's step-6 log ({step6_log(root)}); "
                  "choose another folder", file=sys.stderr)
            return 2
        result = train_grpo(inputs["model"], inputs["rows"], inputs["hidden_tests"], out, settings)
    else:
        from course_lib.rl.passk import greedy_test_pass1, sample_pass_at_k

        model = inputs["model"] if args.model == "pipeline_sft" else args.model
        result = {"model": str(model)}
        if not args.no_greedy:
            result["greedy_test_pass1"] = greedy_test_pass1(model, inputs["eval_rows"], profile=args.profile)
            print("greedy test pass@1:", json.dumps({k: v for k, v in result["greedy_test_pass1"].items()
                                                      if k != "per_prompt"}), flush=True)
        if not args.no_passk:
            result["pass_at_k"] = sample_pass_at_k(model, inputs["eval_rows"], settings, limit_per_part=args.passk_limit)
            print("pass@k:", json.dumps(result["pass_at_k"]), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
