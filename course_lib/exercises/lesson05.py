"""Lesson 05's exercises (instruction data and SFT): answer-only labels and the offline auditor's
rubric."""
from __future__ import annotations

from course_lib.exercises import Exercise
from course_lib.training import instructions, teacher


def rubric_reference(status, defines=False, documented=False, has_tests=False):
    """:func:`course_lib.training.teacher.rubric_score` with positional flags, as the lesson's exercise asks."""
    return teacher.rubric_score(status, defines=defines, documented=documented, has_tests=has_tests)


EXERCISES = [
    Exercise(
        id="05-1", name="my_answer_only_labels", reference=instructions.answer_only_labels,
        cases=[([5, 6, 7, 8], 2), ([1, 2, 3], 0), ([9, 9], 2), ([4, 0, 4, 0], 1), ([7, 8, 9], 3),
               ([11, 12, 13, 14, 15], 4)],
        description="-100 on the first prompt_len tokens, the token id on the rest."),
    Exercise(
        id="05-2", name="my_rubric_score", reference=rubric_reference,
        cases=[("no code",), ("no code", True, True, True), ("syntax_error", True, True),
               ("passed", True, True, True), ("passed",), ("passed", False, False, True),
               ("passed", False, True), ("not run", True, True, True), ("not run", False, False, True),
               ("failed", True, False, True), ("failed", True, False, False), ("timeout", True),
               ("runtime_error",), ("memory_limit", True, True, True),
               ("output_limit", True, True, True), ("output_limit",),          # a crash like the others
               ("sandbox_error", True, True, True), ("sandbox_error", False, False, False)],
        description="0 no code; 2 syntax error; 7 (+1 defines, +1 documented, +1 tests run and passed) "
                    "for passed / not run; 5 failed with tests; else 4 (runtime error, timeout, memory or "
                    "output limit, sandbox error)."),
]
