"""Every exercise's check rejects plausible wrong answers — naming the failing case — and accepts
correct answers that are written differently from the reference.

The wrong answers live beside this file, one module per lesson (``lessonNN.py``: ``WRONG_ANSWERS``, and
``RIGHT_ANSWERS`` where a correct answer differs from the reference in form). A check that lets a wrong
answer through teaches the wrong thing; one that rejects a right answer teaches distrust.
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


def _collect(attr: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for m in pkgutil.iter_modules(wrong_answers.__path__):
        if m.name.startswith("lesson"):
            module = importlib.import_module(f"tests.wrong_answers.{m.name}")
            for exercise_id, fns in getattr(module, attr, {}).items():
                found.setdefault(exercise_id, []).extend(fns)
    return found


EXERCISES = exercises.all_exercises()
WRONG = _collect("WRONG_ANSWERS")
RIGHT = _collect("RIGHT_ANSWERS")

# The wrong answers issue 27 found accepted, by exercise: each must stay in the collection above.
ISSUE_27_CLASSES = {
    "01-1": ["alnum_over_non_whitespace", "alnum_over_utf8_bytes", "alnum_over_stripped_text",
             "alnum_counts_underscore"],
    "01-2": ["email_tld_case_sensitive", "email_keeps_any_example_domain"],
    "01-3": ["ipv4_guard_without_le", "ipv4_guard_without_compatible", "ipv4_guard_without_ne",
             "ipv4_guard_without_version_word"],
    "02-1": ["minhash_ascii_ignore", "minhash_latin1_replace"],
    "05-2": ["rubric_lists_three_crashes", "rubric_sandbox_error_is_not_run"],
    "07-1": ["extract_without_ipython_pycon", "extract_unindented_fences_only", "extract_closes_on_three_only"],
}
# ... and the two correct answers it found rejected.
ISSUE_27_RIGHT = {"06-1": ["reward_raises_value_error"], "06-2": ["pass_at_k_decreasing_i"]}


def _name(fn) -> str:
    return getattr(fn, "__name__", repr(fn))


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_every_exercise_has_wrong_answers(exercise_id):
    assert len(WRONG.get(exercise_id, [])) >= MIN_WRONG, (
        f"exercise {exercise_id} needs at least {MIN_WRONG} wrong answers in tests/wrong_answers/")


@pytest.mark.parametrize("exercise_id,index", [(e, i) for e in sorted(WRONG) for i in range(len(WRONG[e]))],
                         ids=[f"{e}-{_name(f)}" for e in sorted(WRONG) for f in WRONG[e]])
def test_wrong_answer_is_rejected_naming_the_case(exercise_id, index):
    assert exercise_id in EXERCISES, f"wrong answers for an unknown exercise {exercise_id}"
    wrong = WRONG[exercise_id][index]
    with pytest.raises(ExerciseCheckError) as info:
        exercises.check(exercise_id, wrong, strict=True)
    message = str(info.value)
    assert re.search(r"第 \d+ 个 case（共 \d+ 个）", message) and "input:" in message, (
        f"{exercise_id}: wrong answer {_name(wrong)} was rejected without naming the failing case: {message}")


@pytest.mark.parametrize("exercise_id,index", [(e, i) for e in sorted(RIGHT) for i in range(len(RIGHT[e]))],
                         ids=[f"{e}-{_name(f)}" for e in sorted(RIGHT) for f in RIGHT[e]])
def test_correct_answer_in_another_form_is_accepted(exercise_id, index, capsys):
    right = RIGHT[exercise_id][index]
    assert exercises.check(exercise_id, right, strict=True) is right
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("table,collected", [(ISSUE_27_CLASSES, WRONG), (ISSUE_27_RIGHT, RIGHT)],
                         ids=["wrong", "right"])
def test_the_answers_issue_27_found_are_kept(table, collected):
    missing = [f"{e}: {name}" for e, names in table.items() for name in names
               if name not in {_name(f) for f in collected.get(e, [])}]
    assert not missing, f"the answers issue 27 found must stay in tests/wrong_answers/: {missing}"
