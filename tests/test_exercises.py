"""The exercise registry: every exercise's check accepts its reference, lessons check through the
registry, and the checker's registry features (``adapt``, :class:`~course_lib.exercises.lesson06.Raised`).

Plausible wrong answers (and correct answers in another form) are in ``tests/wrong_answers/``.
"""
from __future__ import annotations

import re

import pytest

from course_lib import exercises

EXERCISES = exercises.all_exercises()


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_reference_passes_its_own_check(exercise_id):
    ex = EXERCISES[exercise_id]
    assert exercises.check(exercise_id, ex.reference, strict=True) is ex.reference


def test_lessons_check_exercises_through_the_registry(repo):
    """A lesson that checks an exercise does so with ``exercises.check("NN-k", ...)`` (so the cases
    are the registered ones), and every registered exercise is checked in its lesson."""
    used: set[str] = set()
    for src in sorted((repo / "lessons").glob("*.py")):
        text = src.read_text(encoding="utf-8")
        used |= set(re.findall(r"exercises\.check\(\s*[\"'](\d\d-\d+)[\"']", text))
    missing = sorted(set(EXERCISES) - used)
    assert not missing, f"registered exercises no lesson checks: {missing}"


def test_an_adapted_exercise_returns_the_students_own_function():
    """06-1 compares through ``as_outcome``; the notebook still gets back the function it wrote (or the
    plain reference), never the wrapper."""
    from course_lib.evaluation.rewards import reward_from_result
    from course_lib.evaluation.sandbox import SandboxResult

    def my_reward(result):
        if result.status == "sandbox_error":
            raise KeyError("no reward")
        return reward_from_result(result)

    assert exercises.check("06-1", my_reward, strict=True) is my_reward

    def unfinished(result):
        raise NotImplementedError

    fallback = exercises.check("06-1", unfinished, strict=False)
    assert fallback is reward_from_result
    with pytest.raises(RuntimeError):
        fallback(SandboxResult("sandbox_error"))


def test_raised_equals_any_exception_but_no_value():
    from course_lib.exercises.lesson06 import Raised, as_outcome

    assert Raised("KeyError") == Raised("RuntimeError")
    assert Raised("KeyError") != 0.0 and Raised("KeyError") != "raises KeyError"
    assert repr(as_outcome(lambda: 1 / 0)()) == "raises ZeroDivisionError"
