"""Lesson 09's exercises: group-normalised advantages and the F-beta localisation score.
Introduced in lesson 09."""
from __future__ import annotations

from course_lib.exercises import Exercise
from course_lib.exercises.checks import values_equal


def reference_group_advantages(rewards, eps=1e-6):
    from course_lib.agentic.grpo import group_advantages

    return group_advantages(rewards, eps)


def reference_f_beta(predicted, gold, beta=2.0):
    from course_lib.agentic.rewards import f_beta

    return f_beta(predicted, gold, beta)


def _close(got, expected):
    """Agreement to 1e-4: ``(r - mean) / sqrt(var + eps)`` is as right as ``/ (std + eps)``."""
    return values_equal(got, expected, rel=1e-4, abs_=1e-4)


EXERCISES = [
    Exercise(
        id="09-1", name="my_group_advantages", reference=reference_group_advantages, compare=_close,
        description="(r - mean) / (population std + eps)",
        cases=[([1, 0, 0, 1],), ([1, 0],), ([0.2, 0.5, 0.9, 0.1, 0.0],), ([1, 1, 1, 1],), ([0, 0, 0, 1],),
               ([3.0, -1.0, 2.0],)]),
    Exercise(
        id="09-2", name="my_f_beta", reference=reference_f_beta, compare=_close,
        description="F-beta of predicted vs gold files (sets)",
        cases=[(["src/a.py"], ["src/a.py"]), (["src/a.py", "src/b.py", "src/c.py"], ["src/a.py"]),
               (["src/a.py"], ["src/a.py", "src/b.py", "src/c.py"]), ([], ["src/a.py"]), ([], []),
               (["x.py", "y.py"], ["y.py", "z.py"], 1.0), (["a.py", "a.py", "b.py"], ["a.py"]),
               (["a.py", "b.py"], ["a.py", "c.py", "d.py"], 0.5)]),
]
