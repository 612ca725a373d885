"""Every exercise's check accepts the reference and rejects plausible wrong answers.

The exercises are registered in ``course_lib/exercises/lessonNN.py``; the wrong answers live in
``tests/wrong_answers/lessonNN.py``. A check that lets a wrong answer through teaches the wrong thing.
"""
from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

from course_lib import exercises
from course_lib.exercises.checks import ExerciseCheckError
from tests import wrong_answers

MIN_WRONG = 3


def _wrong_answers() -> dict[str, list]:
    found: dict[str, list] = {}
    for m in pkgutil.iter_modules(wrong_answers.__path__):
        if m.name.startswith("lesson"):
            found.update(importlib.import_module(f"tests.wrong_answers.{m.name}").WRONG_ANSWERS)
    return found


EXERCISES = exercises.all_exercises()
WRONG = _wrong_answers()


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_reference_passes_its_own_check(exercise_id):
    ex = EXERCISES[exercise_id]
    assert exercises.check(exercise_id, ex.reference, strict=True) is ex.reference


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_every_exercise_has_wrong_answers(exercise_id):
    assert len(WRONG.get(exercise_id, [])) >= MIN_WRONG, (
        f"exercise {exercise_id} needs at least {MIN_WRONG} wrong answers in tests/wrong_answers/")


@pytest.mark.parametrize("exercise_id,index", [(e, i) for e in sorted(WRONG) for i in range(len(WRONG[e]))])
def test_wrong_answer_is_rejected_naming_the_case(exercise_id, index):
    assert exercise_id in EXERCISES, f"wrong answers for an unknown exercise {exercise_id}"
    wrong = WRONG[exercise_id][index]
    with pytest.raises(ExerciseCheckError) as info:
        exercises.check(exercise_id, wrong, strict=True)
    message = str(info.value)
    assert re.search(r"case \d+ of \d+", message), (
        f"{exercise_id}: wrong answer {getattr(wrong, '__name__', index)} was rejected without "
        f"naming the failing case: {message}")


def test_lessons_check_exercises_through_the_registry(repo):
    """A lesson that checks an exercise does so with ``exercises.check("NN-k", ...)`` (so the cases
    are the registered ones), and every registered exercise is checked in its lesson."""
    used: set[str] = set()
    for src in sorted((repo / "lessons").glob("*.py")):
        text = src.read_text(encoding="utf-8")
        used |= set(re.findall(r"exercises\.check\(\s*[\"'](\d\d-\d+)[\"']", text))
    missing = sorted(set(EXERCISES) - used)
    assert not missing, f"registered exercises no lesson checks: {missing}"
