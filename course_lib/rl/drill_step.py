"""Step 6 of the drill — rl: group-relative RL from pipeline SFT, rewards from the course sandbox (lesson 10).

:func:`step_rl` trains the variant ``rl`` with :func:`course_lib.rl.train_grpo` (TRL's ``GRPOTrainer`` in
the TRL side environment) on the training rows' prompts — the pipeline's ``codegen.json`` rows whose
``train_python.json`` row has hidden tests — starting from ``pipeline_sft``; each rollout continues after
the task's ``def`` line (test pass@1's protocol) and is rewarded by the sandbox running the row's hidden
tests. It writes ``<model-dir>/rl/model`` and ``<model-dir>/rl/sft_result.json`` (the record step 4 reads
for every trained variant), ``<output-dir>/rl/train_log.json`` (one record per optimisation step) and
then runs steps 4 and 5 on ``rl`` exactly as on the other variants, so ``drill_metrics.json`` gains the
row ``"rl"`` with the same keys.

The drill (lesson 07) registers the step by name in :data:`course_lib.drill.steps.LATER_STEPS` and loads
this module only when the step is checked, described or run; this module uses the drill's public
functions (lesson 07) and lesson 10's :mod:`course_lib.rl`.

Why a sixth step and not one between 3 and 4: the step numbers of ``--only-step`` stay those of the
lecture's five stages. Without the TRL environment the step is skipped, saying why and how to create it
(``./course setup`` builds it; ``python -m course_lib.tooling.environments setup trl``).

Introduced in lesson 10.
"""
from __future__ import annotations

from typing import Any, Sequence

from course_lib.drill.config import DrillConfig, Need, RunState, Step
from course_lib.drill.outputs import (
    StepOutputError,
    log,
    read_json_output,
    sha_or_none,
    up_to_date,
    write_json_output,
)

# RLSettings fields that change how fast the step runs, not what it trains: left out of the cache key
_RUNTIME_ONLY = ("threads", "judge_workers", "worker_timeout_s", "omp_wait_policy", "passk_batch_size")
# ... and the profile's sandbox.backend, which the key has through the profile's name (it keeps the backend
# named for the run, sandbox_backend, as it always has)
_NOT_IN_KEY = (*_RUNTIME_ONLY, "sandbox_configured")
# issue 35's levers, added after step 6 was first cached: at their off value they change nothing, so they stay out
# of the key there (a cached step 6 stays valid); switched on, they are part of it
_LEVERS_OFF = {"top_entropy_quantile": 1.0, "prefilter_samples": 0}


def drill_rl_settings(cfg: DrillConfig):
    """The :class:`course_lib.rl.RLSettings` of step 6: the profile's ``rl`` section with the run's
    ``--rl-*`` options (``cfg.rl_overrides``) over it, seeded with the run's seed (``cfg.seed``) unless those
    options name one; the judge's backend is chosen as step 5's is (the
    run's ``--sandbox-backend``, ``cfg.sandbox_backend``, unless the rl options name one; else the
    sandbox's rule with the profile's ``sandbox.backend``: Docker in full, bwrap in ci), so step 6's rewards
    run where step 5's verdicts do. Introduced in lesson 10."""
    from course_lib.rl.settings import rl_settings

    overrides = dict(cfg.rl_overrides)
    if overrides.get("seed") is None:      # the run's seed (``--seed``, lesson 07's SEED) unless the rl options name one
        overrides["seed"] = cfg.seed
    if overrides.get("sandbox_backend") is None:
        overrides["sandbox_backend"] = cfg.sandbox_backend
    return rl_settings(cfg.profile, **overrides)


def rl_unavailable(cfg: DrillConfig) -> str | None:
    """None when step 6 can train here, else why not and what to do (no TRL environment).
    Introduced in lesson 10."""
    from course_lib.rl.trl_env import trl_python

    python, why = trl_python()
    return None if python else why


def no_reward_reason(cfg: DrillConfig) -> str | None:
    """None when some training row has hidden tests (the rewards come from them), else why step 6 cannot
    train: hub rows carry no tests (the full profile's ``nampdn-ai/tiny-codes``), and what to give instead.
    Introduced in lesson 10."""
    train = read_json_output(cfg.paths.train_json, "download")
    if any(r.get("tests") for r in train):
        return None
    return (f"none of the {len(train)} training rows has hidden tests, so there is no reward to train on (hub rows "
            "carry none); give --hidden-tests FILE with tests for the training rows' idx, as the ci sample's "
            "assets/tiny_codes/hidden_tests.jsonl does")


def _rl_config(cfg: DrillConfig) -> dict:
    s = drill_rl_settings(cfg).as_dict()
    return {"start": sha_or_none(cfg.paths.model_record("pipeline_sft")), "rows": sha_or_none(cfg.paths.codegen_json),
            "tests": sha_or_none(cfg.paths.train_json), "profile": cfg.profile.name,
            "settings": {k: v for k, v in s.items()
                         if k not in _NOT_IN_KEY and not (k in _LEVERS_OFF and v == _LEVERS_OFF[k])}}


def _train(cfg: DrillConfig, conf: dict) -> dict[str, Any]:
    from course_lib.drill.inference import model_path_for
    from course_lib.rl.trainer import RLUnavailable, train_grpo

    start = model_path_for(cfg, "pipeline_sft")
    rows = read_json_output(cfg.paths.codegen_json, "pipeline")
    hidden = {int(r["idx"]): r for r in read_json_output(cfg.paths.train_json, "download") if r.get("tests")}
    try:
        res = train_grpo(start, rows, hidden, cfg.paths.model_for("rl"), drill_rl_settings(cfg), log=log(),
                         train_log_path=cfg.paths.output_for("rl") / "train_log.json")
    except RLUnavailable as exc:
        raise StepOutputError(f"rl: {exc}") from exc
    keep = ("steps", "prompts", "dropped", "prefilter", "rollouts", "rounds", "sandbox_runs", "seconds", "cpu_seconds",
            "generate_seconds", "judge_seconds", "steps_per_s", "versions", "settings", "first", "last")
    record = {"model_path": res["model_path"], "base_model": start, "rows": res["prompts"],
              "train_log": res["train_log"], "rl": {k: res.get(k) for k in keep}}
    write_json_output(cfg.paths.model_record("rl"), record, conf)
    return {k: res.get(k) for k in ("steps", "prompts", "rollouts", "seconds", "cpu_seconds")}


def step_rl(cfg: DrillConfig, state: RunState | None = None) -> dict:
    """Step 6: train ``rl`` from ``pipeline_sft`` with GRPO, then answer and evaluate it as steps 4-5 do.

    Skipped (logged with the reason, no ``rl`` row: ``state.left_out``) when the TRL environment is missing or
    no training row has hidden tests (:func:`no_reward_reason`: hub rows carry none). Returns
    ``{"train", "inference", "evaluation"}`` (what each part did); ``state``: the run's
    :class:`~course_lib.drill.config.RunState`. Introduced in lesson 10.
    """
    from course_lib.drill.evaluate import step_evaluation, write_drill_metrics
    from course_lib.drill.inference import step_inference

    state = RunState() if state is None else state
    notes = state.notes.setdefault("rl", {})          # variant -> what happened (the run manifest's entry)
    why = rl_unavailable(cfg) or no_reward_reason(cfg)
    if why:
        log().warning("step 6 (rl) skipped: %s", why)
        notes["rl"] = {"status": "skipped", "reason": why}
        state.left_out["rl"] = why           # no rl row in this run's tables
        write_drill_metrics(cfg, {}, state=state)
        return {"skipped": why}
    conf = _rl_config(cfg)
    if up_to_date([cfg.paths.model_record("rl")], conf, cfg.force, "rl"):
        train: dict[str, Any] = {"skipped": True}
    else:
        train = _train(cfg, conf)
    inference = step_inference(cfg, ["rl"], state=state)
    evaluation = step_evaluation(cfg, ["rl"], state=state)
    cached = train == {"skipped": True} and inference["rl"] == {"skipped": True} and \
        state.notes.get("evaluation", {}).get("rl", {}).get("status") == "cached"
    notes["rl"] = {"status": "cached" if cached else "ran", "train": train,
                   "inference": state.notes.get("inference", {}).get("rl"),
                   "evaluation": state.notes.get("evaluation", {}).get("rl")}
    return {"train": train, "inference": inference, "evaluation": evaluation}


def _needs(cfg: DrillConfig) -> list[Need]:
    return [Need(cfg.paths.model_record("pipeline_sft"), "sft", "the fine-tuned model of pipeline_sft"),
            Need(cfg.paths.codegen_json, "pipeline", "the pipeline's codegen.json (the RL prompts)"),
            Need(cfg.paths.train_json, "download", "the training set (the prompts' hidden tests)"),
            Need(cfg.paths.eval_json, "download", "the eval set")]


def _check(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
    from course_lib.drill import evaluate, inference

    try:
        drill_rl_settings(cfg)
    except ValueError as exc:
        return [f"step 6 (rl): {exc}"]
    return inference.STEP.check(cfg, steps) + evaluate.STEP.check(cfg, steps)


def _engine(cfg: DrillConfig) -> dict:
    from course_lib.evaluation.sandbox import named_backend
    from course_lib.rl.trl_env import trl_python

    python, found = trl_python()
    s = drill_rl_settings(cfg)
    try:
        backend = named_backend(s.sandbox_backend, configured=s.sandbox_configured)
    except ValueError:         # an unknown name: step 5's check says so
        backend = s.sandbox_backend
    return {"name": "TRL GRPOTrainer in the TRL environment, rewards from the course sandbox (lesson 10)",
            "python": python or found, "reward": s.reward, "steps": s.steps, "group_size": s.group_size,
            "sandbox_backend": backend,
            "settings": s.as_dict(), "then": "steps 4-5 on the variant rl"}


STEP = Step("rl", run=step_rl, needs=_needs, check=_check, engine=_engine, uses_gpu=True)
