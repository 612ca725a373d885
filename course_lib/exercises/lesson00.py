"""Lesson 00's exercises: count code lines, choose a profile."""
from __future__ import annotations

from course_lib.exercises import Exercise
from course_lib.profiles import recommend_profile
from course_lib.tooling.codestats import count_code_lines

EXERCISES = [
    Exercise(
        id="00-1", name="count_code_lines", reference=count_code_lines,
        cases=[
            ("x = 1\n",),
            ("# only a comment\n\n   \n",),
            ("def f():\n    # explain\n    return 1  # inline comments do not matter\n",),
            ('"""docstring"""\n\nimport os\n',),
            ("",),
            ("a\n\tb\n#c\n",),
            ("    #!shebang-like\n    # indented comment\n",),
            ("x = 1\ny = 2",),  # no newline at the end
            ("s = '#not a comment'\n\t\n",),
        ],
        description="lines that are neither blank nor only a '#' comment"),
    Exercise(
        id="00-2", name="choose_profile", reference=recommend_profile,
        cases=[(True, True), (True, False), (False, True), (False, False)],
        description="'full' needs a GPU and internet, else 'ci'"),
]
