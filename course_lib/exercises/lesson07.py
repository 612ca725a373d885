"""Lesson 07's exercises: code extraction, the lecture's rates, and the sandbox-status categories.

Introduced in lesson 07.
"""
from __future__ import annotations

from course_lib.drill.evaluate import category_of
from course_lib.drill.scoreboard import LECTURE_COUNTS, drill_metrics, summary_from_counts
from course_lib.evaluation.extract import extract_code
from course_lib.exercises import Exercise
from course_lib.exercises.checks import values_equal

RATE_KEYS = ("Pass@1", "FCR", "SER", "RSR", "Fail rate")


def lecture_rates(summary: dict) -> dict:
    """The lecture's five rates (§5.1) from :func:`course_lib.drill.evaluate.summarize`'s dict."""
    m = drill_metrics(summary)
    return {k: m[k] for k in RATE_KEYS}


def _close(a, b) -> bool:
    """The same five rates, each a number within a few ulps of the reference."""
    return (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)
            and all(isinstance(a[k], (int, float)) and values_equal(float(a[k]), float(b[k])) for k in b))


def _summary(fenced_gap: int = 0, **counts) -> dict:
    s = summary_from_counts(counts)
    s["fenced"] -= fenced_gap      # answers whose code sits in an unclosed fence: FCR still counts them
    return s


EXTRACT_CASES = [
    ("Here:\n```python\nx = 1\n```\nDone.",),
    ("```\nprint('no tag')\n```",),
    ("```py\nx = 2\n```",),
    ("```python3\nx = 3\n```",),
    ("```Python\nx = 4\n```",),
    ("```PY3\nx = 5\n```",),
    ("```python\ndef f():\n    return 1\n```\nthen\n```python\nprint(f())\n```",),
    ("```bash\npip install x\n```\n```python\nimport x\n```",),
    ("```json\n{\"a\": 1}\n```",),
    ("no code at all",),
    ("```python\nx = 1\ny = 2",),
    ("",),
    ("```ipython\nIn [1]: x = 1\n```",),                           # every tag the text lists
    ("```pycon\n>>> 1 + 1\n2\n```",),
    ("Steps:\n1. Define it:\n   ```python\n   def f():\n       return 1\n   ```\n2. Done.",),   # indented fence
    ("````python\nx = 1\n````\nExplanation: x is one.",),         # four backticks open and close
    ("``` python\nx = 1\n```",),                                   # a space before the tag
]

RATE_CASES = [
    (_summary(Pass=6, Fail=1, SyntaxError=2, NoCode=1),),
    (_summary(fenced_gap=2, Pass=3, Fail=2, SyntaxError=1, NoCode=2, Timeout=1, Error=1),),
    (_summary(NoCode=5),),
    (_summary(SyntaxError=4),),
] + [(summary_from_counts(c),) for c in LECTURE_COUNTS.values()]

STATUS_CASES = [("passed",), ("failed",), ("runtime_error",), ("memory_limit",), ("output_limit",),
                ("syntax_error",), ("timeout",), ("sandbox_error",)]

EXERCISES = [
    Exercise(id="07-1", name="extract_code", reference=extract_code, cases=EXTRACT_CASES,
             description="the Python code of an answer: Python-tagged (any case) or untagged fences"),
    Exercise(id="07-2", name="Pass@1/FCR/SER/RSR/Fail rate", reference=lecture_rates, cases=RATE_CASES,
             compare=_close, description="the lecture's §5.1 formulas over all N samples"),
    Exercise(id="07-3", name="category_of", reference=category_of, cases=STATUS_CASES,
             description="the lecture's category for a sandbox status; a sandbox failure is Error, "
                         "not the model's Fail"),
]
