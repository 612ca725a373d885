"""Notebook tools: lesson sources, the notebooks generated from them, and records.

``lessons/NN_slug.py`` (a jupytext "percent" file: ``# %%`` starts a code cell, ``# %% [markdown]`` a
markdown cell, slide metadata and tags on the same line) is the source of every lesson, reviewable as
text. :func:`build_notebooks` writes ``solutions/NN_slug.ipynb`` from it and then the student version
``notebooks/NN_slug.ipynb`` (``./course notebooks``). :func:`make_student_notebook` makes the student
version: code between ``### BEGIN SOLUTION`` / ``### END SOLUTION`` becomes
``# YOUR CODE HERE`` + ``raise NotImplementedError``, ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN
TESTS`` blocks disappear, outputs are cleared, slideshow metadata and tags stay.

Introduced in lesson 00.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Iterable

import nbformat

from course_lib.paths import repo_root
from course_lib.tooling.records import RECORD_MIME

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
SLIDE_TYPES = ("slide", "subslide", "fragment", "skip", "notes", "-")
_LESSON_RE = re.compile(r"^(\d\d)_([a-z0-9_]+)\.ipynb$")


class NotebookFormatError(ValueError):
    """A solution notebook breaks a course convention (unbalanced markers, missing metadata)."""


def _root() -> Path:
    root = repo_root()
    if root is None:
        raise FileNotFoundError("the lesson notebooks live in a clone of the course repository")
    return root


def lesson_ids(folder: str = "solutions") -> list[str]:
    """The two-digit ids of the lessons in ``solutions/`` (or ``notebooks/``), in order.
    Public: the course's tooling API for authors (the tests list lessons with it)."""
    return [m.group(1) for p in lesson_paths(folder) if (m := _LESSON_RE.match(p.name))]


def lesson_paths(folder: str = "solutions") -> list[Path]:
    """Paths of the lesson notebooks ``NN_slug.ipynb`` in ``folder``, sorted by number."""
    base = _root() / folder
    return sorted(p for p in base.glob("*.ipynb") if _LESSON_RE.match(p.name))


def _strip_blocks(source: str, where: str) -> str:
    """Replace solution blocks and drop hidden-test blocks in one cell's source."""
    out: list[str] = []
    mode = None  # None | "solution" | "hidden"
    for lineno, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped == BEGIN_SOLUTION:
            if mode is not None:
                raise NotebookFormatError(f"{where}, line {lineno}: {BEGIN_SOLUTION} inside another block")
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f"{indent}raise NotImplementedError")
            mode = "solution"
        elif stripped == END_SOLUTION:
            if mode != "solution":
                raise NotebookFormatError(f"{where}, line {lineno}: {END_SOLUTION} without {BEGIN_SOLUTION}")
            mode = None
        elif stripped == BEGIN_HIDDEN:
            if mode is not None:
                raise NotebookFormatError(f"{where}, line {lineno}: {BEGIN_HIDDEN} inside another block")
            mode = "hidden"
        elif stripped == END_HIDDEN:
            if mode != "hidden":
                raise NotebookFormatError(f"{where}, line {lineno}: {END_HIDDEN} without {BEGIN_HIDDEN}")
            mode = None
        elif mode is None:
            out.append(line)
    if mode is not None:
        raise NotebookFormatError(f"{where}: a {mode} block is never closed")
    return "\n".join(out)


def make_student_notebook(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """Return the student version of solution notebook ``nb`` (the input is not changed)."""
    student = copy.deepcopy(nb)
    for index, cell in enumerate(student.cells):
        where = f"{name}, cell {index}"
        if cell.cell_type == "code":
            cell.source = _strip_blocks(cell.source, where)
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
            cell.metadata.pop("papermill", None)
        elif cell.cell_type == "markdown" and BEGIN_SOLUTION in cell.source:
            cell.source = re.sub(
                rf"{re.escape(BEGIN_SOLUTION)}.*?{re.escape(END_SOLUTION)}", "YOUR ANSWER HERE",
                cell.source, flags=re.S)
    student.metadata.pop("papermill", None)
    return student


def dumps(nb: nbformat.NotebookNode) -> str:
    """Serialise a notebook the way the course writes every notebook (stable, diff-friendly)."""
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def student_path_for(solution: Path) -> Path:
    return _root() / "notebooks" / solution.name


# --- lesson sources (text) → solutions/ → notebooks/ ---------------------------------------------

LESSON_SOURCE_DIR = "lessons"
_JUPYTEXT_FORMAT = "py:percent"
_SOURCE_RE = re.compile(r"^(\d\d)_([a-z0-9_]+)\.py$")


def lesson_source_paths() -> list[Path]:
    """The lesson sources ``lessons/NN_slug.py``, sorted by number."""
    base = _root() / LESSON_SOURCE_DIR
    return sorted(p for p in base.glob("*.py") if _SOURCE_RE.match(p.name))


def read_lesson_source(path: str | Path) -> nbformat.NotebookNode:
    """Parse one lesson source into a solution notebook (kernelspec, stable cell ids, lint-checked)."""
    import jupytext

    path = Path(path)
    nb = jupytext.reads(path.read_text(encoding="utf-8"), fmt=_JUPYTEXT_FORMAT)
    nb.metadata = nbformat.from_dict({
        "kernelspec": {"name": KERNEL_NAME, "display_name": "Python 3 (code-llm-course)",
                       "language": "python"},
        "language_info": {"name": "python"}})
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i:03d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    problems = lint_notebook(nb, str(path))
    if problems:
        raise NotebookFormatError("\n".join(problems))
    return nb


def lesson_source_text(nb: nbformat.NotebookNode) -> str:
    """A notebook as a lesson source (the inverse of :func:`read_lesson_source`)."""
    import jupytext

    nb = copy.deepcopy(nb)
    nb.metadata = nbformat.from_dict({"jupytext": {"notebook_metadata_filter": "-all",
                                                   "cell_metadata_filter": "slideshow,tags,-all"}})
    return jupytext.writes(nb, fmt=_JUPYTEXT_FORMAT)


def _write_if_changed(target: Path, text: str, check: bool, drifted: list[Path]) -> None:
    current = target.read_text(encoding="utf-8") if target.exists() else None
    if current != text:
        drifted.append(target)
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(target.suffix + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)  # atomic: never a half-written notebook


def build_notebooks(check: bool = False) -> list[Path]:
    """Write ``solutions/*.ipynb`` from ``lessons/*.py``, then ``notebooks/*.ipynb`` from those.

    The sources themselves are rewritten in jupytext's canonical form (cell separators, blank
    comment lines), so a later diff shows only real changes. With ``check=True`` write nothing and
    return the files that are missing, differ from what the build makes, or have no source (stray).
    ``./course notebooks [--check]``."""
    drifted: list[Path] = []
    expected = set()
    for src in lesson_source_paths():
        target = _root() / "solutions" / (src.stem + ".ipynb")
        expected.add(target.name)
        nb = read_lesson_source(src)
        _write_if_changed(src, lesson_source_text(nb), check, drifted)  # the canonical text of the source
        _write_if_changed(target, dumps(nb), check, drifted)
    for stray in lesson_paths("solutions"):
        if stray.name not in expected:
            drifted.append(stray)
            if not check:
                stray.unlink()
    if check and drifted:
        return drifted + [p for p in _student_drift_from_sources() if p not in drifted]
    return drifted + generate_student_notebooks(check=check)


def _student_drift_from_sources() -> list[Path]:
    out = []
    for src in lesson_source_paths():
        target = student_path_for(_root() / "solutions" / (src.stem + ".ipynb"))
        text = dumps(make_student_notebook(read_lesson_source(src), src.stem + ".ipynb"))
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            out.append(target)
    return out


def generate_student_notebooks(check: bool = False) -> list[Path]:
    """Write ``notebooks/`` from ``solutions/``. With ``check=True`` write nothing and return the
    student notebooks that are missing or differ from what the generator makes (plus stray ones)."""
    drifted: list[Path] = []
    expected_names = set()
    for sol in lesson_paths("solutions"):
        nb = nbformat.read(sol, as_version=4)
        target = student_path_for(sol)
        expected_names.add(target.name)
        _write_if_changed(target, dumps(make_student_notebook(nb, sol.name)), check, drifted)
    for stray in lesson_paths("notebooks"):
        if stray.name not in expected_names:
            drifted.append(stray)
            if not check:
                stray.unlink()
    return drifted


def lint_notebook(nb: nbformat.NotebookNode, name: str = "notebook") -> list[str]:
    """Course conventions a lesson notebook must follow; returns the problems found."""
    problems = []
    if not nb.cells or nb.cells[0].cell_type != "markdown" or not nb.cells[0].source.lstrip().startswith("# "):
        problems.append(f"{name}: the first cell must be a markdown title ('# ...')")
    if not any("parameters" in c.metadata.get("tags", []) for c in nb.cells):
        problems.append(f"{name}: no cell is tagged 'parameters'")
    for i, c in enumerate(nb.cells):
        st = c.metadata.get("slideshow", {}).get("slide_type")
        if st not in SLIDE_TYPES:
            problems.append(f"{name}, cell {i}: slideshow.slide_type is {st!r}, expected one of {SLIDE_TYPES}")
    return problems


def read_records(nb_or_path: Any) -> dict[str, Any]:
    """Values an executed notebook recorded with :func:`course_lib.record`, by name."""
    nb = nb_or_path if isinstance(nb_or_path, nbformat.NotebookNode) else nbformat.read(nb_or_path, as_version=4)
    found: dict[str, Any] = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if RECORD_MIME in data:
                payload = data[RECORD_MIME]
                if isinstance(payload, str):
                    payload = json.loads(payload)
                found.update(payload)
    return found


# --- building notebooks in code (tests, tools) ---------------------------------------------------

def _cell(factory, source: str, slide: str, tags: Iterable[str]) -> nbformat.NotebookNode:
    cell = factory(source.strip("\n"))
    cell.metadata["slideshow"] = {"slide_type": slide}
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def md(source: str, slide: str = "-", tags: Iterable[str] = ()) -> nbformat.NotebookNode:
    """A markdown cell with slide metadata (``slide`` is a ``slideshow.slide_type``)."""
    return _cell(nbformat.v4.new_markdown_cell, source, slide, tags)


def code(source: str, slide: str = "-", tags: Iterable[str] = ()) -> nbformat.NotebookNode:
    """A code cell with slide metadata; setup cells should use ``slide="skip"``."""
    return _cell(nbformat.v4.new_code_cell, source, slide, tags)


KERNEL_NAME = "code-llm-course"


def write_notebook(path: str | Path, cells: list[nbformat.NotebookNode]) -> Path:
    """Write a lesson notebook with the course kernelspec and stable cell ids.
    Public: the course's tooling API for authors (the tests write fixture notebooks with it)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i:03d}"
    nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "Python 3 (code-llm-course)",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    problems = lint_notebook(nb, str(path))
    if problems:
        raise NotebookFormatError("\n".join(problems))
    path = Path(path)
    path.write_text(dumps(nb), encoding="utf-8")
    return path
