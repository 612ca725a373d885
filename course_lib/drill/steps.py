"""The drill's steps, in run order: the one place a step is registered.

Each step is a module that ends with its ``STEP = Step(...)`` (:class:`course_lib.drill.settings.Step`).
A new step is one more module and one more entry in :data:`DRILL_STEPS` (and, when it trains a model,
one more :data:`course_lib.drill.settings.VARIANTS` entry); ``--only-step`` and ``--skip-steps`` take
the names or the numbers (from 1) of this list.

Introduced in lesson 07.
"""
from __future__ import annotations

from course_lib.drill import download, evaluate, finetune, inference, pipeline, rl
from course_lib.drill.settings import Step

DRILL_STEPS: tuple[Step, ...] = (download.STEP, pipeline.STEP, finetune.STEP, inference.STEP, evaluate.STEP, rl.STEP)

STEPS: tuple[str, ...] = tuple(s.name for s in DRILL_STEPS)


def get_step(name: str) -> Step:
    """The registered step called ``name``."""
    for s in DRILL_STEPS:
        if s.name == name:
            return s
    raise ValueError(f"unknown step {name!r}; steps are {', '.join(STEPS)}")
