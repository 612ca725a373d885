"""The package's layout follows the course: a lesson module never imports from a later lesson.

Shared modules (``paths``, ``profiles``, ``store``) and the course tooling (lesson 00) may be imported by
every lesson; ``tooling`` and ``exercises`` may import any lesson (they serve the whole course).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import course_lib

PKG = Path(course_lib.__file__).resolve().parent

# module (dotted, relative to course_lib) or package prefix → the lesson that introduces it
LESSON_OF = {
    "paths": 0, "profiles": 0, "store": 0, "tooling": 0, "data": 1, "training": 4,
    "data.repos": 1, "data.github": 1, "data.filters": 1, "data.redaction": 1, "data.redaction_eval": 1,
    "data.corpus": 1, "data.dedup": 2, "data.dedup_scaleout": 2, "data.scripts": 2, "data.deps": 3,
    "training.fim": 4, "training.tinymodel": 4, "training.instructions": 5, "training.codegen": 5,
    "training.teacher": 5, "training.sft": 5, "training.rule_teacher": 5, "training.fim_probe": 4,
    "training.bench_results": 4, "training.sft_demo": 5,
    "evaluation": 6, "drill": 7, "drill.rl": 10, "agentic": 8, "rl": 10,
}
EXEMPT = ("tooling", "exercises")  # serve the whole course
# Imports against lesson order that are known and stated, with the reason; the list only shrinks.
# (Lesson 05 gets the sandbox it checks answers with as an argument: ``run_code`` / ``run_many``.)
KNOWN_LATER_IMPORTS: dict[tuple[str, str], str] = {
    # the drill is the course's running project: lesson 10 adds its sixth step (issue 25), which the drill's
    # step registry and CLI name; the step's own code lives in drill.rl (lesson 10)
    ("drill.steps", "drill.rl"): "the registry lists step 6, rl (lesson 10)",
    ("drill.command", "rl.settings.REWARDS"): "--rl-reward's choices are lesson 10's rewards",
}


def lesson_of(dotted: str) -> int | None:
    """The lesson of ``course_lib.<dotted>`` (longest matching prefix)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in LESSON_OF:
            return LESSON_OF[key]
    return None


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        dotted = ".".join(p for p in rel.parts if p != "__init__")
        if dotted and dotted != "__main__" and not dotted.startswith(EXEMPT):
            yield dotted, path


def _imports(path: Path, dotted: str):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = dotted.split(".")[:-1] if path.name != "__init__.py" else dotted.split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("course_lib."):
                    yield node.lineno, a.name[len("course_lib."):]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                mod = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("course_lib."):
                mod = node.module[len("course_lib."):]
            elif node.module == "course_lib":
                mod = ""
            else:
                continue
            for a in node.names:
                target = f"{mod}.{a.name}" if mod else a.name
                yield node.lineno, target if lesson_of(target) is not None else mod


def test_every_module_has_a_lesson():
    missing = [d for d, _ in _modules() if lesson_of(d) is None and d not in ("",)]
    assert not missing, f"add these modules to LESSON_OF in tests/test_layout.py: {missing}"


@pytest.mark.parametrize("dotted,path", list(_modules()), ids=[d for d, _ in _modules()])
def test_no_import_from_a_later_lesson(dotted, path):
    own = lesson_of(dotted)
    later = [(line, target, lesson_of(target)) for line, target in _imports(path, dotted)
             if target and lesson_of(target) is not None and lesson_of(target) > own
             and (dotted, target) not in KNOWN_LATER_IMPORTS]
    assert not later, "\n".join(
        f"{path.relative_to(PKG.parent)}:{line} (lesson {own:02d}) imports course_lib.{t} (lesson {n:02d})"
        for line, t, n in later)
