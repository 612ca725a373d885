"""The notebook regression: every solution notebook (strict checks), then every student notebook
(unfinished exercises must say "not done yet" and go on), each in a fresh kernel, ci profile.

Executed copies and per-cell durations (``<name>.durations.json``) go to ``build/test-notebooks/``.
Select with ``-m notebooks`` / skip with ``-m "not notebooks"``; ``COURSE_NOTEBOOK_TIMEOUT`` sets the
per-notebook budget in seconds (default 900).
"""
from __future__ import annotations

import pytest

from course_lib.tooling.nbtools import lesson_paths
from tests.notebook_helpers import failure_message, records_of, run_lesson

pytestmark = pytest.mark.notebooks


@pytest.mark.parametrize("path", lesson_paths("solutions"), ids=lambda p: p.stem)
def test_solution_notebook_runs_with_strict_checks(path):
    run = run_lesson(path, "solutions")
    if not run.ok:
        pytest.fail(failure_message(run), pytrace=False)


# A student notebook holds no hidden tests, and its exercises' checks do not depend on these sizes: its run
# proves that the student's copy runs to the end, so the cells that only repeat the solution's sampling at
# full size run smaller here (CI budget; `./course run` runs the student notebooks at the lessons' sizes).
STUDENT_PARAMETERS = {"04": {"N_PROBE_TASKS": 12}, "05": {"SFT_PROBE": 3}, "10": {"PASSK_PROMPTS": 2}}


@pytest.mark.parametrize("path", lesson_paths("notebooks"), ids=lambda p: p.stem)
def test_student_notebook_runs_to_the_end(path):
    run = run_lesson(path, "notebooks", parameters=STUDENT_PARAMETERS.get(path.name[:2]))
    if not run.ok:
        pytest.fail(failure_message(run), pytrace=False)
    import nbformat

    nb = nbformat.read(run.output, as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    if "raise NotImplementedError" in "".join(c.source for c in nb.cells):
        assert "not done yet" in printed, f"{path.name}: an unfinished exercise did not say 'not done yet'"


def test_lesson_00_records():
    rec = records_of("00")
    from tests.notebook_helpers import regression_dir

    durations = regression_dir("solutions") / "00_setup_and_tour.durations.json"
    assert durations.exists(), "the regression writes per-cell durations beside each executed notebook"
    assert rec["python_ok"] is True
    assert rec["base_packages_missing_or_wrong"] == []
    assert rec["course_stages"] == 11
    assert rec["suggested_profile"] in ("ci", "full")
    import json as _json
    from pathlib import Path

    from course_lib.tooling.codestats import count_code_lines

    assert rec["json_code_lines"] == count_code_lines(Path(_json.__file__).read_text(encoding="utf-8"))
