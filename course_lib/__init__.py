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
function's docstring names the lesson that introduces it. The flat names of earlier versions
(``course_lib.data.filters``, ``course_lib.evaluation.sandbox``, ...) keep working as aliases of the modules above.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

# Old flat module names → their place in the pipeline layout (aliases, same module objects).
MOVED_MODULES = {
    "repos": "data.repos", "github": "data.github", "filters": "data.filters",
    "redaction": "data.redaction", "redaction_eval": "data.redaction_eval", "corpus": "data.corpus",
    "dedup": "data.dedup", "dedup_scaleout": "data.dedup_scaleout", "deps": "data.deps",
    "scripts": "data.scripts",
    "fim": "training.fim", "tinymodel": "training.tinymodel", "instructions": "training.instructions",
    "codegen": "training.codegen", "teacher": "training.teacher", "sft": "training.sft",
    "sandbox": "evaluation.sandbox", "rewards": "evaluation.rewards", "metrics": "evaluation.metrics",
    "humaneval": "evaluation.humaneval",
    "runner": "tooling.runner", "slides": "tooling.slides", "nbtools": "tooling.nbtools",
    "checks": "exercises.checks", "envcheck": "tooling.envcheck", "cli": "tooling.cli",
    "coursemap": "tooling.coursemap", "codestats": "tooling.codestats",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        module.__spec__ = importlib.util.find_spec(self.target)  # keep the module's own spec


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Resolves ``course_lib.<old name>[.sub]`` to the module's place in the pipeline layout."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(__name__ + "."):
            return None
        head, _, tail = fullname[len(__name__) + 1:].partition(".")
        if head not in MOVED_MODULES:
            return None
        new = f"{__name__}.{MOVED_MODULES[head]}" + (f".{tail}" if tail else "")
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModuleFinder())

from course_lib.exercises.checks import check_function, check_value  # noqa: E402
from course_lib.paths import build_dir, cache_dir, repo_root  # noqa: E402
from course_lib.profiles import PROFILES, Profile, get_profile  # noqa: E402
from course_lib.tooling.records import record  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Profile", "get_profile", "PROFILES", "check_function", "check_value", "record",
    "repo_root", "cache_dir", "build_dir", "__version__",
]
