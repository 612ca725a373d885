"""The package's layout follows the course: nothing imports from a later lesson.

Every module is introduced in a lesson (:data:`LESSON_OF`, which must agree with the "Introduced in lesson
NN" of its docstrings) and imports only modules of that lesson or earlier ones. Every ``import`` counts,
also those inside a function; one inside a function whose docstring says "Introduced in lesson NN" is
held to that function's lesson (a lesson-10 function of a lesson-07 module may import lesson 10). The
lessons' own sources (``lessons/NN_*.py``) follow the same rule, and one package uses another's private
(``_name``) functions never: only its public ones.

Shared modules (``paths``, ``profiles``, ``store``) and the course tooling (lesson 00) may be imported by
every lesson; ``tooling`` and ``exercises`` may import any lesson (they serve the whole course).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import course_lib

PKG = Path(course_lib.__file__).resolve().parent
LESSONS = PKG.parent / "lessons"

# module (dotted, relative to course_lib) or package prefix → the lesson that introduces it
LESSON_OF = {
    "paths": 0, "profiles": 0, "store": 1, "tooling": 0, "data": 1, "training": 4,
    "data.repos": 1, "data.github": 1, "data.filters": 1, "data.redaction": 1, "data.redaction_eval": 1,
    "data.corpus": 1, "data.dedup": 2, "data.dedup_scaleout": 2, "data.scripts": 2, "data.deps": 3,
    "training.fim": 4, "training.tinymodel": 4, "training.instructions": 5, "training.codegen": 5,
    "training.teacher": 5, "training.sft": 5, "training.rule_teacher": 7, "training.rule_teacher_cpp": 7, "training.fim_probe": 4,
    "training.bench_results": 4, "training.sft_demo": 5, "training.pretrained": 5, "training.llm_teacher": 5,
    "evaluation.vllm_engine": 5, "evaluation.scripts": 5, "evaluation.paired": 7,
    "evaluation": 6, "drill": 7, "drill.rl": 10, "agentic": 8,
    "agentic.critic": 9, "agentic.distill": 9, "agentic.grpo": 9, "agentic.rule_rewards": 9, "agentic.turns": 9,
    "rl": 10,
}
EXEMPT = ("tooling", "exercises")  # serve the whole course
# Imports against lesson order that are known and stated, with the reason; the list only shrinks.
KNOWN_LATER_IMPORTS: dict[tuple[str, str], str] = {}
# The same for the lessons' sources: (lesson number, module) → why.
KNOWN_LATER_LESSON_IMPORTS: dict[tuple[int, str], str] = {
    (5, "evaluation.sandbox"): "lesson 05 runs the teacher's code in the sandbox as a black box (given to "
                               "codegen as run_code); lesson 06 opens it",
}

_INTRODUCED = re.compile(r"Introduced in lesson (\d+)")


def lesson_of(dotted: str) -> int | None:
    """The lesson of ``course_lib.<dotted>`` (longest matching prefix)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in LESSON_OF:
            return LESSON_OF[key]
    return None


def _dotted(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    return ".".join(p for p in rel.parts if p != "__init__")


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        dotted = _dotted(path)
        if dotted and dotted != "__main__" and not dotted.startswith(EXEMPT):
            yield dotted, path


def _docstring_lesson(node) -> int | None:
    doc = ast.get_docstring(node) or ""
    found = [int(n) for n in _INTRODUCED.findall(doc)]
    return min(found) if found else None


def _imports(tree: ast.Module, package: list[str]):
    """(line, target module or module.name, lesson of the innermost function/class that states one, name)
    for every import of course_lib in ``tree``, at any depth."""
    def walk(node, stated):
        for child in ast.iter_child_nodes(node):
            own = stated
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own = _docstring_lesson(child) if _docstring_lesson(child) is not None else stated
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.startswith("course_lib."):
                        yield child.lineno, a.name[len("course_lib."):], own, None
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[: len(package) - (child.level - 1)] if child.level > 1 else package
                    mod = ".".join(base + ([child.module] if child.module else []))
                elif child.module and child.module.startswith("course_lib."):
                    mod = child.module[len("course_lib."):]
                elif child.module == "course_lib":
                    mod = ""
                else:
                    continue
                for a in child.names:
                    target = f"{mod}.{a.name}" if mod else a.name
                    yield child.lineno, target if lesson_of(target) is not None else mod, own, a.name
            yield from walk(child, own)
    yield from walk(tree, None)


def _module_imports(path: Path, dotted: str):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = dotted.split(".")[:-1] if path.name != "__init__.py" else dotted.split(".")
    return tree, list(_imports(tree, package))


def test_every_module_has_a_lesson():
    missing = [d for d, _ in _modules() if lesson_of(d) is None and d not in ("",)]
    assert not missing, f"add these modules to LESSON_OF in tests/test_layout.py: {missing}"


@pytest.mark.parametrize("dotted,path", list(_modules()), ids=[d for d, _ in _modules()])
def test_the_lesson_table_matches_the_docstrings(dotted, path):
    """A module is introduced in the first lesson its docstrings name (its own or its definitions')."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stated = [n for n in [_docstring_lesson(tree)] + [_docstring_lesson(d) for d in tree.body
              if isinstance(d, (ast.FunctionDef, ast.ClassDef)) and not d.name.startswith("_")] if n is not None]
    if stated:
        assert min(stated) == lesson_of(dotted), (
            f"course_lib.{dotted}: its docstrings say lesson {min(stated):02d}, LESSON_OF says {lesson_of(dotted)}")


@pytest.mark.parametrize("dotted,path", list(_modules()), ids=[d for d, _ in _modules()])
def test_no_import_from_a_later_lesson(dotted, path):
    """Every import, at the top or inside a function, names a module of the importer's lesson or earlier."""
    own = lesson_of(dotted)
    _, imports = _module_imports(path, dotted)
    later = [(line, target, lesson_of(target), stated if stated is not None else own)
             for line, target, stated, _ in imports
             if target and lesson_of(target) is not None
             and lesson_of(target) > (stated if stated is not None else own)
             and (dotted, target) not in KNOWN_LATER_IMPORTS]
    assert not later, "\n".join(
        f"{path.relative_to(PKG.parent)}:{line} (lesson {at:02d}) imports course_lib.{t} (lesson {n:02d})"
        for line, t, n, at in later)


@pytest.mark.parametrize("dotted,path", list(_modules()), ids=[d for d, _ in _modules()])
def test_no_private_name_from_another_package(dotted, path):
    """``from course_lib.drill.x import _helper`` only inside ``course_lib.drill``: other packages use the
    public functions, which say what they promise."""
    _, imports = _module_imports(path, dotted)
    top = dotted.split(".")[0]
    private = [(line, target, name) for line, target, _, name in imports
               if name and name.startswith("_") and not name.startswith("__")
               and target.split(".")[0] != top]
    assert not private, "\n".join(f"{path.relative_to(PKG.parent)}:{line} imports {name} from course_lib.{t}"
                                  for line, t, name in private)


LESSON_SOURCES = sorted(LESSONS.glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=[p.stem for p in LESSON_SOURCES])
def test_a_lesson_imports_no_later_lesson(path):
    """Lesson NN's source uses course_lib modules of lessons <= NN (and the course tooling)."""
    number = int(path.name[:2])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    later = [(line, t) for line, t, _, _ in _imports(tree, [])
             if t and not t.startswith(EXEMPT) and (lesson_of(t) or 0) > number
             and not any(t == m or t.startswith(m + ".") for n, m in KNOWN_LATER_LESSON_IMPORTS if n == number)]
    assert not later, "\n".join(f"lessons/{path.name}:{line} imports course_lib.{t} (lesson {lesson_of(t):02d})"
                                for line, t in later)
