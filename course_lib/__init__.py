"""course_lib — the shared helper package of the course "第20课时：代码能力增强".

The package follows the course's pipeline, one sub-package per stage:

- ``course_lib.data``        lessons 01–03: repositories, file filters, licences, secret redaction, the
  corpus, exact and near-duplicate removal, dependency order;
- ``course_lib.training``    lessons 04–05: fill-in-the-middle, the course's tiny model, instruction
  data, the LazyLLM codegen pipeline and its teacher, supervised fine-tuning;
- ``course_lib.evaluation``  lesson 06: the sandbox, rewards, pass@k, HumanEval;
- ``course_lib.drill``       lesson 07: the tiny-codes drill, end to end;
- ``course_lib.agentic``     lessons 08–09: KAT-Coder's agentic training and RL;
- ``course_lib.tooling``     the course itself: notebook runner, slides, lesson sources, notebook
  records, environment report, command line, course map;
- ``course_lib.exercises``   every exercise's reference and cases, and the checker that compares a
  student's answer with them; ``profiles`` and ``paths`` are shared.

A lesson module imports only from its own or earlier stages (``tests/test_layout.py``). Each public
function's docstring names the lesson that introduces it.
"""
from __future__ import annotations

from course_lib.exercises.checks import check_function, check_value
from course_lib.paths import build_dir, cache_dir, repo_root
from course_lib.profiles import PROFILES, Profile, get_profile
from course_lib.tooling.records import record

__version__ = "0.1.0"

__all__ = [
    "Profile", "get_profile", "PROFILES", "check_function", "check_value", "record",
    "repo_root", "cache_dir", "build_dir", "__version__",
]
