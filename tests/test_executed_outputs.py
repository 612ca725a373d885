"""Executed notebooks are clean: figures shown, no absolute local paths, no value printed twice,
and no course_lib module changes matplotlib's backend.

The notebook checks read the regression's executed copies (``build/test-notebooks/solutions/``, written
by ``tests/test_notebooks.py``); they run after the regression (marker ``notebooks``) and execute a
lesson first when its copy is missing.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import nbformat
import pytest

from course_lib.tooling.records import RECORD_MIME

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = Path(os.environ.get("COURSE_EXECUTED_DIR", ROOT / "build" / "test-notebooks" / "solutions"))
PLOT_CALL = re.compile(r"\bplt\.(show|subplots|figure|plot|bar|hist)\(|\bdraw_[a-z_]+\(|\.plot\(")
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/!])(/(?:home|root|work|tmp|usr|opt|var|mnt|srv)/[\w.-]+)")


def test_no_course_lib_module_calls_matplotlib_use():
    offenders = []
    for path in sorted((ROOT / "course_lib").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "use"
                    and "matplotlib" in ast.unparse(node.func.value)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, "library code changes the kernel's matplotlib backend: " + ", ".join(offenders)


def _executed(notebook_records) -> list[Path]:
    if "COURSE_EXECUTED_DIR" not in os.environ:
        from course_lib.tooling.nbtools import lesson_ids

        for lesson in lesson_ids():
            notebook_records(lesson)  # executed by the regression already, or now
    found = sorted(EXECUTED.glob("[0-9][0-9]_*.ipynb"))
    assert found, f"no executed notebooks in {EXECUTED}"
    return found


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    return "\n".join(str(data[k]) for k in ("text/plain", "text/html", "text/markdown") if k in data)


@pytest.mark.notebooks
def test_each_notebook_that_plots_shows_images(notebook_records):
    problems = []
    for path in _executed(notebook_records):
        nb = nbformat.read(path, as_version=4)
        plots = [c for c in nb.cells if c.cell_type == "code" and PLOT_CALL.search(c.source)]
        images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                     if any(k.startswith("image/") for k in o.get("data", {})))
        if plots and images == 0:
            problems.append(f"{path.name}: {len(plots)} cells plot but no image was recorded")
    assert not problems, "\n".join(problems)


@pytest.mark.notebooks
def test_no_absolute_local_paths_in_outputs(notebook_records):
    problems = []
    for path in _executed(notebook_records):
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            for output in cell.get("outputs", []):
                for match in ABSOLUTE_PATH.finditer(_text(output)):
                    problems.append(f"{path.name}, cell {index}: {match.group(1)}")
                    break
    assert not problems, "outputs show absolute local paths:\n" + "\n".join(problems[:40])


@pytest.mark.notebooks
def test_no_value_printed_twice(notebook_records):
    """A cell ending in a bare ``record(...)`` shows the record line and then the value again."""
    problems = []
    for path in _executed(notebook_records):
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            lines = [ln for ln in cell.source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
            last = lines[-1].strip() if lines else ""
            outputs = cell.get("outputs", [])
            recorded = any(RECORD_MIME in o.get("data", {}) for o in outputs)
            shown = any(o.get("output_type") == "execute_result" for o in outputs)
            if recorded and shown and last.startswith("record(") and not last.endswith(";"):
                problems.append(f"{path.name}, cell {index}: the recorded value is shown again "
                                "(end the line with `;`)")
    assert not problems, "\n".join(problems)
