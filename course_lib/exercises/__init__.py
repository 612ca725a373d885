"""Every exercise of the course, importable outside the notebooks: its reference and its cases.

A lesson's exercises live in ``course_lib/exercises/lessonNN.py`` as a list ``EXERCISES`` of
:class:`Exercise`. The notebook checks a student's function with ``exercises.check("03-2", fn)``;
``tests/test_exercises.py`` feeds every exercise plausible wrong answers (``tests/wrong_answers/``)
and asserts the check rejects each one with a message that names the failing case.

Introduced in lesson 00.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from course_lib.exercises.checks import check_function


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``id`` "NN-k" (lesson NN, k-th exercise), the function name the notebook uses,
    the reference implementation, the cases (as :func:`course_lib.check_function` takes them), an
    optional comparison, and an optional ``adapt`` that wraps the student's function before it is
    compared (06-1 turns "raised" into a value with it); ``reference`` is already in that form and
    an adapted function keeps the original as ``.wrapped``."""

    id: str
    name: str
    reference: Callable
    cases: Sequence[Any]
    compare: Callable[[Any, Any], bool] | None = None
    description: str = field(default="", compare=False)
    adapt: Callable[[Callable], Callable] | None = None


def _lesson_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("lesson"))


def all_exercises() -> dict[str, Exercise]:
    """Every registered exercise by id, in lesson order."""
    found: dict[str, Exercise] = {}
    for mod_name in _lesson_modules():
        module = importlib.import_module(f"{__name__}.{mod_name}")
        for ex in getattr(module, "EXERCISES", []):
            if ex.id in found:
                raise ValueError(f"exercise id {ex.id!r} is registered twice ({mod_name})")
            found[ex.id] = ex
    return found


def get(exercise_id: str) -> Exercise:
    """The exercise with this id ("03-2"); KeyError names the known ids."""
    lesson = exercise_id.split("-")[0]
    module = importlib.import_module(f"{__name__}.lesson{lesson}")
    for ex in getattr(module, "EXERCISES", []):
        if ex.id == exercise_id:
            return ex
    raise KeyError(f"no exercise {exercise_id!r}; lesson {lesson} has: "
                   + ", ".join(e.id for e in getattr(module, "EXERCISES", [])))


def check(exercise_id: str, student: Callable, *, strict: bool | None = None) -> Callable:
    """Check ``student`` against exercise ``exercise_id`` (see :func:`course_lib.check_function`);
    returns the function the notebook uses next (the student's own, or the reference)."""
    ex = get(exercise_id)
    candidate = ex.adapt(student) if ex.adapt else student
    chosen = check_function(candidate, ex.reference, ex.cases, name=ex.name, compare=ex.compare,
                            strict=strict)
    if chosen is candidate:
        return student
    return getattr(chosen, "wrapped", chosen) if ex.adapt else chosen
