"""Helpers shared by the notebook regression and by lesson tests that check recorded values.

``records_of("04")`` returns what lesson 04's solution notebook recorded with ``course_lib.record``;
it reuses the executed copy the regression wrote under ``build/test-notebooks/solutions/`` and runs the
notebook (ci profile, strict checks) only when that copy is missing.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

from course_lib.paths import build_dir
from course_lib.tooling.nbtools import lesson_paths, read_records
from course_lib.tooling.runner import NotebookRun, execute_notebook

TIMEOUT_S = float(os.environ.get("COURSE_NOTEBOOK_TIMEOUT", "900"))

# The drill at the regression's size (CI budget, issue 33): 200 eval rows (100 per eval part) instead of the ci
# profile's 500, 400 SFT steps instead of 800 and 8 RL steps instead of 25 — the same functions, steps, checks
# and the SmolLM2 reference row; lesson 07's hidden checks hold at this size. Lessons 10 and 11 read
# lesson 07's drill, so they get the same sizes (they find its folder from them: <cache>/drill/ci-eval200-sft400,
# config.default_root, so the regression never replaces the drill `./course run` trained at the profile's sizes).
# `./course run` runs every lesson at its profile's sizes.
REGRESSION_DRILL = {"EVAL_SIZE": 200, "SFT_STEPS": 400}
REGRESSION_PARAMETERS: dict[str, dict[str, Any]] = {"07": {**REGRESSION_DRILL, "RL_STEPS": 8},
                                                     "10": {**REGRESSION_DRILL, "RL_STEPS": 8},
                                                     "11": dict(REGRESSION_DRILL)}


def regression_dir(folder: str) -> Path:
    """``build/test-notebooks/<solutions|notebooks>/``: executed copies and per-cell durations."""
    return build_dir("test-notebooks", folder)


@contextlib.contextmanager
def machine_threads() -> Iterator[None]:
    """Lift the one-thread limits that tests/conftest.py set for the test process (named in
    ``COURSE_TEST_THREAD_LIMITS``; limits the caller set stay), so a notebook kernel started meanwhile
    uses the machine's threads as under ``./course run`` and prints the same numbers."""
    names = [n for n in os.environ.get("COURSE_TEST_THREAD_LIMITS", "").split(",") if n]
    saved = {n: os.environ.pop(n, None) for n in names}
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is not None:
                os.environ[n] = v


def run_lesson(path: Path, folder: str, parameters: dict[str, Any] | None = None,
               out_dir: Path | None = None) -> NotebookRun:
    """Execute one lesson notebook like the regression does (with the machine's threads, as under
    ``./course run``) and write its durations next to it. ``parameters`` go to papermill (e.g. another
    ``SEED``) over :data:`REGRESSION_PARAMETERS`; ``out_dir`` defaults to :func:`regression_dir`."""
    out_dir = out_dir or regression_dir(folder)
    parameters = {**REGRESSION_PARAMETERS.get(path.name[:2], {}), **(parameters or {})} or None
    with machine_threads():
        run = execute_notebook(path, out_dir / path.name, profile="ci", strict=(folder == "solutions"),
                               timeout_s=TIMEOUT_S, progress=False, parameters=parameters)
    (out_dir / f"{path.stem}.durations.json").write_text(
        json.dumps(run.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")
    return run


def error_traceback(executed: str | Path | None, lines: int = 25) -> str:
    """The last ``lines`` lines of the first error's traceback in an executed notebook (ANSI colours
    removed), so a failure in CI shows where it happened without the executed copy."""
    import re

    if not executed or not Path(executed).exists():
        return ""
    nb = json.loads(Path(executed).read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and out.get("ename") != "SystemExit":
                text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(out.get("traceback", [])))
                tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
                return "\n".join("    " + ln for ln in tail)
    return ""


def failure_message(run: NotebookRun) -> str:
    slow = ", ".join(f"cell {c.index}: {c.seconds:.1f} s" for c in run.slowest_cells())
    tb = error_traceback(run.output)
    return (f"{run.name} ({Path(run.source).parent.name}/): {run.status} after {run.seconds:.0f} s — "
            f"{run.first_error() or 'no error message'}\n  executed copy: {run.output}\n  slowest: {slow}"
            + (f"\n  traceback (last lines):\n{tb}" if tb else ""))


def records_of(lesson_id: str, folder: str = "solutions") -> dict[str, Any]:
    """Recorded values of lesson ``lesson_id`` (``"04"``), executing it when no executed copy exists."""
    matches = [p for p in lesson_paths(folder) if p.name.startswith(f"{lesson_id}_")]
    if not matches:
        raise LookupError(f"no lesson {lesson_id} in {folder}/")
    executed = regression_dir(folder) / matches[0].name
    if not executed.exists():
        run = run_lesson(matches[0], folder)
        if not run.ok:
            raise AssertionError(failure_message(run))
    return read_records(executed)
