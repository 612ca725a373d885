"""`./course test` runs the suite in two pytest-xdist workers: the notebook side (the regression, the tests that
read its executed copies, the slide tests) stays in one worker in its order, the Docker tests in one worker,
everything else goes where a worker is free (tests/conftest.py)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# cheap tests: four of the notebook side (test_slides exports the executed copies when present) and four others
SLIDES = ["test_lesson_00_exports_with_a_slide_per_section", "test_injected_parameters_and_skipped_cells_are_not_shown",
          "test_slides_strip_solutions_and_hidden_tests_and_split_tall_cells",
          "test_slides_drop_frozen_widget_bars_and_show_a_text_bar_in_its_last_state"]
OTHERS = ["test_notebooks_folder_is_exactly_what_the_generator_makes",
          "test_every_solution_has_a_student_version_and_follows_conventions"]


def test_course_test_runs_two_workers_unless_told_otherwise():
    script = (ROOT / "course").read_text(encoding="utf-8")
    assert 'workers="${COURSE_TEST_WORKERS:-2}"' in script and "--dist loadgroup" in script
    # options that need one process drop the workers
    assert re.search(r"case \"\$a\" in -n\|.*--pdb.*-s\|", script), "-n/--pdb/-s must keep pytest's own behaviour"


@pytest.mark.slow
def test_two_workers_keep_the_notebook_side_on_one_worker():
    pytest.importorskip("xdist")
    selection = [f"tests/test_slides.py::{t}" for t in SLIDES] + [f"tests/test_nbtools.py::{t}" for t in OTHERS]
    out = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
                          "--no-header", *selection], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    where = {name: gw for gw, name in re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED tests/\S+::(\S+)", out.stdout)}
    assert set(where) == set(SLIDES + OTHERS), out.stdout[-3000:]
    workers = {where[t] for t in SLIDES}
    assert len(workers) == 1, f"the slide tests ran on {sorted(workers)}: the notebook side must stay on one worker"
