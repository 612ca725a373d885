"""The drill at the regression's size through its command line (``python -m course_lib.drill``, lesson 07's
one-click call with tests/notebook_helpers.REGRESSION_PARAMETERS), into the course's drill folder.

Run first on the unit-test worker of a two-worker session (tests/conftest.py): lesson 07's notebook, on the
other worker, then finds every step cached, as a returning student does, and still runs and checks every cell;
the notebook worker waits for this test before lessons 07, 10 and 11 (``drill_done_path``). In one process it
runs after the notebook regression and finds lesson 07's steps cached. Its log:
``build/test-notebooks/drill-regression.log``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.notebook_helpers import REGRESSION_PARAMETERS, machine_threads, regression_dir

pytestmark = [pytest.mark.slow, pytest.mark.notebooks]   # part of the regression: `-m "not notebooks"` leaves it out

ROOT = Path(__file__).resolve().parent.parent
FLAGS = {"TRAIN_SIZE": "--train-size", "EVAL_SIZE": "--eval-size", "SFT_STEPS": "--sft-steps", "RL_STEPS": "--rl-steps"}


def command() -> list[str]:
    """Lesson 07's one-click call with the regression's parameters."""
    argv = [sys.executable, "-m", "course_lib.drill", "--profile", "ci", "--quiet"]
    for name, value in REGRESSION_PARAMETERS["07"].items():
        argv += [FLAGS[name], str(value)]
    return argv


def drill_done_path() -> Path | None:
    """Where this test says it has ended in a two-worker session (None in one process)."""
    groups = os.environ.get("COURSE_TEST_XDIST_GROUPS")
    return Path(groups + ".drill-done") if groups else None


def say_drill_done(outcome: str) -> None:
    """tests/conftest.py calls this at the drill test's teardown (passed, failed or skipped)."""
    done = drill_done_path()
    if done is not None:
        done.write_text(outcome, encoding="utf-8")


def wait_for_drill(timeout_s: float = 1800.0) -> str:
    """Block until this session's drill test has ended (its exit code), or say why not."""
    done = drill_done_path()
    if done is None:
        return "one process: nothing to wait for"
    t0 = time.monotonic()
    while not done.exists():
        if time.monotonic() - t0 > timeout_s:
            return f"gave up after {timeout_s:.0f} s"
        time.sleep(5)
    return done.read_text(encoding="utf-8")


def test_the_regression_drill_runs_from_the_command_line():
    from course_lib import drill

    log = regression_dir("solutions").parent / "drill-regression.log"
    with machine_threads(), open(log, "w", encoding="utf-8") as fh:    # the machine's threads, like lesson 07's kernel
        rc = subprocess.run(command(), cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=dict(os.environ), timeout=2400).returncode
    tail = "".join(log.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)[-25:])
    assert rc == 0, f"`{' '.join(command()[1:])}` ended with exit code {rc}; the log's end ({log}):\n{tail}"
    p = REGRESSION_PARAMETERS["07"]
    cfg = drill.config_from_profile("ci", eval_size=p.get("EVAL_SIZE"), sft_steps=p.get("SFT_STEPS"))
    metrics = json.loads((cfg.paths.output_dir / "drill_metrics.json").read_text(encoding="utf-8"))
    assert {"base", "raw_sft", "pipeline_sft", "rl"} <= set(metrics), sorted(metrics)
    assert all(m["samples"] == p["EVAL_SIZE"] for m in metrics.values()), {v: m["samples"] for v, m in metrics.items()}
