"""The drill's run (the lesson's ``run.py``): the steps in order, what a run needs, and running them.

Each step is a module that ends with its ``STEP = Step(...)`` (:class:`course_lib.drill.config.Step`):
``download`` → ``pipeline`` → ``sft`` (:mod:`~course_lib.drill.finetune`) → ``inference`` →
``evaluation`` (:mod:`~course_lib.drill.evaluate`) → ``rl`` (:mod:`~course_lib.rl.drill_step`, lesson 10), listed in run order in
:data:`course_lib.drill.steps.DRILL_STEPS`, the one place a new step is registered.

Each step skips itself when its outputs are whole and were made with the same configuration (``force``
redoes it), writes atomically, and logs with timestamps. Missing prerequisites are found *before*
anything runs, with a sentence naming the step to run. The same functions drive the CLI
(``python -m course_lib.drill``), the notebook ``07_tiny_codes_drill`` and the tests.

Introduced in lesson 07.
"""
from __future__ import annotations

import json
import time
from typing import Any

from course_lib.drill import manifest, preflight
from course_lib.drill.config import VARIANTS, DrillConfig, PrerequisiteError, RunState, Step
from course_lib.drill.outputs import StepOutputError, log, output_state
from course_lib.drill.steps import DRILL_STEPS, STEPS

__all__ = ["DRILL_STEPS", "STEPS", "check_prerequisites", "load_metrics", "load_report", "parse_steps",
           "plan_steps", "run_drill", "step_settings"]


def _step(name: str) -> Step:
    return next(s for s in DRILL_STEPS if s.name == name)


def parse_steps(text: str | list[str] | None) -> list[str]:
    """Step names from ``"1,3"``, ``"download,sft"`` or a list; raises on an unknown step."""
    if not text:
        return []
    items = text if isinstance(text, list) else str(text).replace(" ", ",").split(",")
    out = []
    for item in (s.strip().lower() for s in items):
        if not item:
            continue
        if item.isdigit() and 1 <= int(item) <= len(STEPS):
            item = STEPS[int(item) - 1]
        if item not in STEPS:
            raise ValueError(f"unknown step {item!r}; steps are 1-{len(STEPS)} or {', '.join(STEPS)}")
        out.append(item)
    return out


def plan_steps(cfg: DrillConfig, skip_steps=None, only_step=None) -> list[str]:
    """The steps this run executes, in order (``only_step`` wins over ``skip_steps``)."""
    only, skip = parse_steps(only_step), set(parse_steps(skip_steps))
    steps = [s for s in STEPS if (s in only if only else s not in skip)]
    if not cfg.use_pipeline and "pipeline" in steps:
        steps.remove("pipeline")
    # a step that trains variants of which this run wants none (rl without --rl / with --no-rl) is left out
    trainers = {v.trained_by for v in VARIANTS if v.trained_by}
    return [s for s in steps if s not in trainers or cfg.trained_variants(s)]


def check_prerequisites(cfg: DrillConfig, steps: list[str]) -> list[str]:
    """Problems that would stop ``steps``, each naming the step to run first (empty list: all good).

    Introduced in lesson 07.
    """
    problems: list[str] = []
    for name in steps:
        step = _step(name)
        for need in step.needs(cfg):
            if need.made_by not in steps and not output_state(need.path)[0]:
                problems.append(f"{need.what} ({need.path}) is missing or incomplete: run step "
                                f"{STEPS.index(need.made_by) + 1} `--only-step {need.made_by}` first")
        problems += step.check(cfg, steps)
    if cfg.profile.drill.preflight:   # before any GPU work: models, teacher, Docker, GPU memory
        problems += preflight.check_full_prerequisites(cfg, steps)
    return problems


def run_drill(cfg: DrillConfig, *, skip_steps=None, only_step=None, state: RunState | None = None) -> dict[str, Any]:
    """Run the planned steps in order; returns what each step did. ``cfg`` is only read; what the run records
    as it goes (each step's notes per variant, the manifest's source) goes to ``state`` (a new
    :class:`RunState` when None; pass one to read the notes afterwards). Introduced in lesson 07."""
    state = RunState() if state is None else state
    cfg.paths.make()
    steps = plan_steps(cfg, skip_steps, only_step)
    problems = check_prerequisites(cfg, steps)
    if problems:
        raise PrerequisiteError("cannot start the drill:\n  - " + "\n  - ".join(problems))
    log().info("drill (%s profile): steps %s; variants %s; folders %s", cfg.profile.name, ", ".join(steps),
               ", ".join(cfg.variants()), cfg.paths.data_dir.parent)
    done: dict[str, Any] = {}
    gpu_checked = False
    state.planned_steps = tuple(steps)
    state.notes.clear()            # this run's notes only (a step may note what it did for a later one)
    state.left_out.clear()
    try:
        for i, name in enumerate(steps):
            step, number = _step(name), STEPS.index(name) + 1
            if cfg.profile.drill.preflight and step.uses_gpu and not gpu_checked:
                gpu_checked = True   # the teacher of step 2 may have held the GPU until now
                problems = preflight.gpu_memory_problems(cfg, steps[i:])
                if problems:
                    raise PrerequisiteError(f"cannot start step {number} ({name}):\n  - " + "\n  - ".join(problems))
            t0 = time.monotonic()
            started = manifest.now()
            log().info("step %d/%d %s: start", number, len(STEPS), name)
            state.notes.setdefault(name, {})
            try:
                done[name] = step.run(cfg, state)
            except BaseException as exc:
                manifest.record_step(cfg, name, started, time.monotonic() - t0, None,
                                     error=f"{type(exc).__name__}: {exc}", state=state)
                raise
            manifest.record_step(cfg, name, started, time.monotonic() - t0, done[name], state=state)
            log().info("step %d/%d %s: finished in %.1f s", number, len(STEPS), name, time.monotonic() - t0)
    finally:
        state.planned_steps = ()
    return done


def step_settings(cfg: DrillConfig, step: str) -> dict[str, Any]:
    """The engine of ``step`` and the settings it runs with in ``cfg`` (the run manifest's ``engine``).
    Introduced in lesson 07."""
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}")
    return _step(step).engine(cfg)


# --- reading results back (notebook, tests) -------------------------------------------------------

def load_metrics(cfg: DrillConfig) -> dict[str, dict]:
    """Metrics of every evaluated variant (from each ``summary.json``), in table order; a variant whose
    answers are to an earlier eval set (``evaluate.answers_match_eval_set``: e.g. step 6's ``rl`` after the
    eval set changed and steps 1–5 ran again) is left out, with a warning in the log."""
    from course_lib.drill.evaluate import answers_match_eval_set

    out = {}
    for v in VARIANTS:
        path = cfg.paths.output_for(v.name) / "summary.json"
        if output_state(path)[0]:
            if not answers_match_eval_set(cfg, v.name):
                log().warning("%s: its answers are to an earlier eval set; left out of the tables until its "
                              "step runs again", v.name)
                continue
            out[v.name] = json.loads(path.read_text(encoding="utf-8"))["metrics"]
    return out


def load_report(cfg: DrillConfig, variant: str):
    """The ``evaluation_report.csv`` of ``variant`` as a pandas DataFrame."""
    import pandas as pd

    path = cfg.paths.output_for(variant) / "evaluation_report.csv"
    ok, why = output_state(path)
    if not ok:
        raise StepOutputError(f"{why}; run step 5 (`--only-step evaluation`)")
    return pd.read_csv(path)
