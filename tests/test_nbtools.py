"""The student-notebook generator, the notebook lint and recorded values."""
from __future__ import annotations

import nbformat
import pytest

from course_lib.tooling.nbtools import (
    NotebookFormatError,
    build_notebooks,
    code,
    dumps,
    generate_student_notebooks,
    lesson_ids,
    lesson_source_paths,
    lesson_source_text,
    lint_notebook,
    make_student_notebook,
    md,
    read_lesson_source,
    read_records,
    write_notebook,
)
from course_lib.tooling.records import RECORD_MIME


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


SOLUTION_CELL = '''def add(a, b):
    """Add two numbers."""
    ### BEGIN SOLUTION
    total = a + b
    return total
    ### END SOLUTION

add = check_function(add, ref, cases=[(1, 2)])
### BEGIN HIDDEN TESTS
assert add(2, 2) == 4
### END HIDDEN TESTS
print("done")'''


def test_solution_block_becomes_placeholder_with_its_indentation():
    student = make_student_notebook(_nb(code(SOLUTION_CELL)))
    src = student.cells[0].source
    assert "    # YOUR CODE HERE\n    raise NotImplementedError" in src
    assert "total = a + b" not in src and "### BEGIN SOLUTION" not in src
    assert src.startswith('def add(a, b):\n    """Add two numbers."""')
    assert "add = check_function(add, ref, cases=[(1, 2)])" in src


def test_hidden_tests_vanish():
    src = make_student_notebook(_nb(code(SOLUTION_CELL))).cells[0].source
    assert "HIDDEN" not in src and "assert add(2, 2) == 4" not in src
    assert src.endswith('print("done")')


def test_student_version_compiles():
    src = make_student_notebook(_nb(code(SOLUTION_CELL))).cells[0].source
    compile(src, "student", "exec")


def test_outputs_cleared_metadata_and_tags_kept():
    cell = code("x = 1\nx", slide="subslide", tags=["parameters"])
    cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=3)]
    cell.execution_count = 3
    cell.metadata["papermill"] = {"duration": 1.0}
    nb = _nb(md("# T", slide="slide"), cell)
    nb.metadata["papermill"] = {"parameters": {}}
    nb.metadata["kernelspec"] = {"name": "code-llm-course"}
    student = make_student_notebook(nb)
    out = student.cells[1]
    assert out.outputs == [] and out.execution_count is None
    assert "papermill" not in out.metadata and "papermill" not in student.metadata
    assert out.metadata["slideshow"] == {"slide_type": "subslide"}
    assert out.metadata["tags"] == ["parameters"]
    assert student.cells[0].metadata["slideshow"] == {"slide_type": "slide"}
    assert student.metadata["kernelspec"]["name"] == "code-llm-course"
    # the input notebook is not changed
    assert cell.outputs and cell.execution_count == 3


def test_markdown_answers_are_hidden():
    cell = md("Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION\nNext.")
    out = make_student_notebook(_nb(cell)).cells[0].source
    assert "Because." not in out and "YOUR ANSWER HERE" in out and out.endswith("Next.")


@pytest.mark.parametrize("source, problem", [
    ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n### END SOLUTION\n", "without"),
    ("### BEGIN SOLUTION\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS\n### END SOLUTION\n", "inside"),
    ("### BEGIN HIDDEN TESTS\nassert 1\n### END SOLUTION\n", "without"),
])
def test_unbalanced_markers_raise_with_cell_and_line(source, problem):
    with pytest.raises(NotebookFormatError, match=problem) as err:
        make_student_notebook(_nb(md("# T"), code(source)), "x.ipynb")
    assert "x.ipynb, cell 1" in str(err.value)


def test_lint_names_each_problem():
    nb = _nb(md("no title"), code("x = 1"))
    nb.cells[1].metadata.pop("slideshow")
    problems = "\n".join(lint_notebook(nb, "n.ipynb"))
    assert "markdown title" in problems
    assert "parameters" in problems
    assert "cell 1" in problems and "slide_type" in problems


def test_write_notebook_refuses_a_notebook_without_parameters(tmp_path):
    with pytest.raises(NotebookFormatError, match="parameters"):
        write_notebook(tmp_path / "x.ipynb", [md("# Title", slide="slide"), code("x = 1")])
    path = write_notebook(tmp_path / "y.ipynb", [md("# Title", slide="slide"),
                                                 code("PROFILE = 'ci'", slide="skip", tags=["parameters"])])
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.kernelspec.name == "code-llm-course"
    assert [c.id for c in nb.cells] == ["c000", "c001"]
    nbformat.validate(nb)


def test_read_records_finds_values_in_outputs():
    cell = code("record(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={RECORD_MIME: {"acc": 0.5},
                                                                 "text/plain": "acc = 0.5"}),
                    nbformat.v4.new_output("display_data", data={RECORD_MIME: {"n": [1, 2]}})]
    assert read_records(_nb(md("# T"), cell)) == {"acc": 0.5, "n": [1, 2]}


def test_dumps_is_stable():
    nb = _nb(md("# 标题", slide="slide"))
    assert dumps(nb) == dumps(nbformat.reads(dumps(nb), as_version=4))
    assert "标题" in dumps(nb)  # not \\u-escaped: readable diffs


# --- the real repository -------------------------------------------------------------------------

def test_every_solution_has_a_student_version_and_follows_conventions(repo):
    ids = lesson_ids("solutions")
    assert "00" in ids
    assert lesson_ids("notebooks") == ids
    for path in sorted((repo / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert lint_notebook(nb, path.name) == []


def test_notebooks_folder_is_exactly_what_the_generator_makes():
    drifted = generate_student_notebooks(check=True)
    assert drifted == [], (
        "notebooks/ is out of date with solutions/: "
        + ", ".join(p.name for p in drifted)
        + " — run `./course notebooks` and commit solutions/ and notebooks/")


def test_solutions_and_notebooks_are_exactly_what_the_lesson_sources_make(repo):
    sources = [p.stem for p in lesson_source_paths()]
    assert sources == [p.stem for p in sorted((repo / "solutions").glob("*.ipynb"))], (
        "every lesson needs a source lessons/NN_slug.py and nothing else in solutions/")
    drifted = build_notebooks(check=True)
    assert drifted == [], (
        "solutions/ or notebooks/ differ from lessons/*.py: "
        + ", ".join(f"{p.parent.name}/{p.name}" for p in drifted)
        + " — edit lessons/*.py (never the .ipynb files), run `./course notebooks` and commit")


def test_lesson_source_round_trips(repo):
    for src in lesson_source_paths():
        nb = read_lesson_source(src)
        assert lesson_source_text(nb) == src.read_text(encoding="utf-8"), (
            f"{src.name} is not in canonical form: run `./course notebooks` and commit")


def test_student_notebooks_contain_no_solutions(repo):
    for path in sorted((repo / "notebooks").glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        for marker in ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS"):
            assert marker not in text, f"{path.name} still contains {marker!r}"
