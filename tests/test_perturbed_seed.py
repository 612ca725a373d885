"""The notebook regression, perturbed: the lessons whose cells run experiments (training, sampling, seeded
toys) run again with another ``SEED`` under strict checks.

What another machine perturbs (its CPU trains another model from the same seed: fp32 kernels differ by
instruction set), another seed perturbs here, so an outcome that holds for one seed only fails in CI and
not on a student's machine (docs/claims.md lists every outcome a lesson states and how it is checked).
Lesson 10 keeps the seed-0 drill that lesson 07 trained (``DRILL_SEED``) and runs its RL step at a toy size
with seed 1; that replaces the drill's step-6 output, so this file runs after the notebook regression
(pytest's alphabetical order: ``test_notebooks.py`` comes first).

Executed copies go to ``build/test-notebooks/solutions-seed1/``.
"""
from __future__ import annotations

import pytest

from course_lib.tooling.nbtools import lesson_paths
from tests.notebook_helpers import failure_message, regression_dir, run_lesson

pytestmark = pytest.mark.notebooks

PERTURBED_SEED = 1
# lesson id -> the other parameters of its perturbed run
# Lesson 04 trains a short pair (every assert of lesson 04 is an invariant of the code; its outcomes are printed,
# docs/claims.md), lesson 05 leaves out the real LLM teacher (its results are printed, only bookkeeping is
# asserted, and the seed would only pick six other rows): the seed still reaches every other cell. Lesson 06's
# one outcome (best-of-n gains more than 0.1) is a numpy Monte-Carlo estimate checked under seeds 0-4 by
# tests/test_claims.py with the lesson's functions, so lesson 06 is not run a second time here. Lesson 11 draws its
# FIM cuts and samples from SEED (./course run --seed 2 once cut a C++ source at position 0); it only reads the
# drills' outputs (a seed-1 drill has not run: it says so) and takes ~30 s.
PERTURBED = {"02": {}, "04": {"TRAIN_STEPS": 60}, "05": {"LLM_TEACHER_ROWS": 0}, "08": {}, "09": {},
             "10": {"DRILL_SEED": 0, "RL_STEPS": 4, "PASSK_PROMPTS": 4}, "11": {}}


@pytest.mark.parametrize("lesson", sorted(PERTURBED))
def test_experiment_lessons_pass_with_another_seed(lesson):
    path = next(p for p in lesson_paths("solutions") if p.name.startswith(f"{lesson}_"))
    run = run_lesson(path, "solutions", parameters={"SEED": PERTURBED_SEED, **PERTURBED[lesson]},
                     out_dir=regression_dir(f"solutions-seed{PERTURBED_SEED}"))
    if not run.ok:
        pytest.fail(f"with SEED={PERTURBED_SEED}: " + failure_message(run), pytrace=False)
