"""The drill's steps, in run order: the one place a step is registered.

Each step is a module that ends with its ``STEP = Step(...)`` (:class:`course_lib.drill.config.Step`).
A new step is one more module and one more entry in :data:`DRILL_STEPS` (and, when it trains a model,
one more :data:`course_lib.drill.config.VARIANTS` entry); ``--only-step`` and ``--skip-steps`` take
the names or the numbers (from 1) of this list.

A step that a later lesson adds (lesson 10's ``rl``) is registered here by name and by the module that
defines it (:data:`LATER_STEPS`): the drill knows it is there and where it runs, and reads its code only
when the step is checked, described or run — so lesson 07's drill never imports lesson 10's code, and
the step's code lives with its lesson (:mod:`course_lib.rl.drill_step`).

Introduced in lesson 07.
"""
from __future__ import annotations

import importlib
from typing import Sequence

from course_lib.drill import download, evaluate, finetune, inference, pipeline
from course_lib.drill.config import DrillConfig, RunState, Step

# steps later lessons add, in run order after lesson 07's five: name -> (module ending with its STEP, uses_gpu)
LATER_STEPS: dict[str, tuple[str, bool]] = {
    "rl": ("course_lib.rl.drill_step", True),     # lesson 10: GRPO from pipeline SFT, then steps 4-5 on rl
}


def later_step(name: str) -> Step:
    """The step ``name`` of :data:`LATER_STEPS`, as a :class:`Step` whose parts load its module when they
    are called. Introduced in lesson 07."""
    module, uses_gpu = LATER_STEPS[name]

    def step() -> Step:
        return importlib.import_module(module).STEP

    def run(cfg: DrillConfig, state: RunState) -> dict:
        return step().run(cfg, state)

    def needs(cfg: DrillConfig) -> list:
        return step().needs(cfg)

    def check(cfg: DrillConfig, steps: Sequence[str]) -> list[str]:
        return step().check(cfg, steps)

    def engine(cfg: DrillConfig) -> dict:
        return step().engine(cfg)

    return Step(name, run=run, needs=needs, check=check, engine=engine, uses_gpu=uses_gpu)


DRILL_STEPS: tuple[Step, ...] = (download.STEP, pipeline.STEP, finetune.STEP, inference.STEP, evaluate.STEP,
                                 *(later_step(n) for n in LATER_STEPS))

STEPS: tuple[str, ...] = tuple(s.name for s in DRILL_STEPS)


def get_step(name: str) -> Step:
    """The registered step called ``name``. Introduced in lesson 07."""
    for s in DRILL_STEPS:
        if s.name == name:
            return s
    raise ValueError(f"unknown step {name!r}; steps are {', '.join(STEPS)}")
