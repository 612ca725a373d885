"""The course command's runner: failures are summarised (cell, last line), setup problems are one sentence."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from course_lib.tooling import runner
from course_lib.tooling.nbtools import code, md, write_notebook
from course_lib.tooling.runner import (
    SetupProblem,
    check_kernel,
    check_writable,
    execute_notebook,
    format_table,
)


def _lesson(path: Path, *cells) -> Path:
    return write_notebook(path, [md("# T", slide="slide"),
                                 code('PROFILE = "ci"', slide="skip", tags=["parameters"]), *cells])


@pytest.mark.slow
def test_a_failing_notebook_names_cell_and_error(tmp_path):
    nb = _lesson(tmp_path / "01_fail.ipynb",
                 code("import os\nprint(PROFILE, os.environ.get('COURSE_CHECKS'))"),
                 code("from course_lib import record\nrecord('answer', 42);"),
                 code("def f():\n    raise ValueError('bad row 7 in data.csv')\nf()"),
                 code("print('never runs')"))
    run = execute_notebook(nb, tmp_path / "out" / "executed" / nb.name, profile="ci", strict=True,
                           timeout_s=120, progress=False)
    assert run.status == "failed"
    assert run.error_cell == 4               # index in the source notebook (papermill's cell not counted)
    assert run.error == "ValueError: bad row 7 in data.csv"
    assert run.first_error() == "cell 4: ValueError: bad row 7 in data.csv"
    assert run.records == {"answer": 42}
    assert [c.index for c in run.cells][:3] == [1, 2, 3]
    assert Path(run.output).exists()
    assert (tmp_path / "out" / "work" / "01_fail").is_dir()  # the scratch cwd
    import nbformat

    out = nbformat.read(run.output, as_version=4)
    printed = "".join(o.get("text", "") for c in out.cells for o in c.get("outputs", []))
    assert "ci strict" in printed


@pytest.mark.slow
def test_a_notebook_over_its_time_budget_is_stopped(tmp_path):
    nb = _lesson(tmp_path / "02_slow.ipynb", code("import time\ntime.sleep(300)"), code("print('late')"))
    run = execute_notebook(nb, tmp_path / "executed" / nb.name, timeout_s=20, progress=False)
    assert run.status == "timeout"
    assert run.error_cell == 2
    assert "--timeout" in run.error
    assert run.seconds < 90


def test_missing_kernel_says_run_setup():
    with pytest.raises(SetupProblem, match=r"not registered; run `./course setup`"):
        check_kernel("no-such-kernel-xyz")


def test_unwritable_output_folder_is_one_sentence(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(SetupProblem, match="cannot write to .* --out DIR"):
        check_writable(blocker / "build")


def test_unknown_lesson_id_lists_what_exists():
    with pytest.raises(SetupProblem, match=r"unknown lesson id\(s\) 99 .* 00 \(00_setup_and_tour\)"):
        runner.select_lessons("solutions", "00,99")
    assert [p.stem for p in runner.select_lessons("solutions", "0")] == ["00_setup_and_tour"]


def test_unknown_profile_exits_2_and_lists_profiles(capsys):
    assert runner.main(["--profile", "gpu"]) == 2
    assert "unknown profile 'gpu'; the course has: ci, full" in capsys.readouterr().err


def test_table_has_one_row_per_notebook():
    runs = [runner.NotebookRun("00_a", "s", "o", "ok", 3.2),
            runner.NotebookRun("01_b", "s", "o", "failed", 10.0, 5, "KeyError: 'x'")]
    table = format_table(runs)
    assert "00_a" in table and "cell 5: KeyError: 'x'" in table
    assert "2 notebook(s), 1 failed" in table


@pytest.mark.slow
def test_a_dying_kernel_is_reported_at_its_cell(tmp_path):
    nb = _lesson(tmp_path / "03_die.ipynb", code("print('alive')"), code("import os\nos._exit(3)"))
    run = execute_notebook(nb, tmp_path / "executed" / nb.name, timeout_s=120, progress=False)
    assert run.status in ("error", "failed")
    assert run.error_cell == 3
    assert "Dead" in run.error or "died" in run.error


def test_lab_overrides_turn_off_the_news_prompt(tmp_path):
    import json

    from course_lib.tooling.cli import write_lab_overrides

    target = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"other:plugin": {"x": 1}}))
    path = write_lab_overrides(str(tmp_path))
    data = json.loads(path.read_text())
    assert data["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert data["other:plugin"] == {"x": 1}


def test_regression_kernels_get_the_machines_threads(monkeypatch):
    """The one-thread limits tests/conftest.py sets for the test process are lifted for a notebook kernel
    (so the regression prints what `./course run` prints); limits the caller set itself stay."""
    from tests.notebook_helpers import machine_threads

    monkeypatch.setenv("COURSE_TEST_THREAD_LIMITS", "OMP_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    with machine_threads():
        assert "OMP_NUM_THREADS" not in os.environ and os.environ["MKL_NUM_THREADS"] == "3"
    assert os.environ["OMP_NUM_THREADS"] == "1"


def test_a_failure_message_carries_the_traceback_tail(tmp_path):
    """A notebook failing in CI shows where it failed without its executed copy (which stays on the CI
    machine): the last lines of the error's traceback, colours removed."""
    import json

    from course_lib.tooling.runner import NotebookRun
    from tests.notebook_helpers import error_traceback, failure_message

    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "error", "ename": "RuntimeError",
                                                        "evalue": "boom", "traceback": [
                                                            "\x1b[0;31mRuntimeError\x1b[0m Traceback",
                                                            "  File x.py, line 3, in f\n    start()",
                                                            "\x1b[0;31mRuntimeError\x1b[0m: boom"]}]}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert error_traceback(path, lines=2) == "        start()\n    RuntimeError: boom"
    run = NotebookRun(name="nb", source=str(path), output=str(path), status="failed", seconds=1.0,
                      error_cell=0, error="RuntimeError: boom")
    msg = failure_message(run)
    assert "traceback (last lines):" in msg and "File x.py, line 3" in msg and "\x1b" not in msg
    assert error_traceback(tmp_path / "missing.ipynb") == ""


@pytest.mark.slow
def test_a_failing_assert_names_what_it_compared_and_the_seed_reaches_the_notebook(tmp_path):
    """A bare ``assert`` in a lesson cell fails with the values it compared (pytest's rewriting in the kernel),
    and ``parameters`` (``./course run --seed``) reach the notebook."""
    nb = write_notebook(tmp_path / "02_assert.ipynb", [
        md("# T", slide="slide"), code('PROFILE = "ci"\nSEED = 0', slide="skip", tags=["parameters"]),
        code("gate, no_gate = 0.388 + SEED, 0.396\nassert gate > no_gate")])
    run = execute_notebook(nb, tmp_path / "out" / nb.name, profile="ci", strict=True, timeout_s=120,
                           progress=False, parameters={"SEED": 0})
    assert run.status == "failed" and run.error_cell == 2
    assert run.error.startswith("AssertionError: assert 0.388 > 0.396"), run.error
    passed = execute_notebook(nb, tmp_path / "out1" / nb.name, profile="ci", strict=True, timeout_s=120,
                              progress=False, parameters={"SEED": 1})
    assert passed.ok, passed.first_error()


def test_an_assertion_line_keeps_its_message_and_names_a_bare_assert():
    from course_lib.tooling.runner import _error_line

    assert _error_line("AssertionError", "held-out loss 4.9 -> 4.1: expected a fall\nassert 4.1 < 3.43") == \
        "AssertionError: held-out loss 4.9 -> 4.1: expected a fall | assert 4.1 < 3.43"
    tb = ["\x1b[0;31mAssertionError\x1b[0m Traceback", "Cell In[3], line 2",
          "\x1b[1;32m----> 2\x1b[0m \x1b[38;5;28;01massert\x1b[39;00m share[\"scc\"] >= share[\"deepseek\"]"]
    assert _error_line("AssertionError", "", tb) == 'AssertionError: assert share["scc"] >= share["deepseek"]'
    assert _error_line("ValueError", "bad row 7\nmore") == "ValueError: bad row 7"


def test_the_kernel_rewrites_asserts_to_show_values():
    from IPython.core.interactiveshell import InteractiveShell

    from course_lib.tooling.assertions import enable

    shell = InteractiveShell.instance()
    try:
        assert enable(shell) and enable(shell)          # idempotent
        assert sum(type(t).__name__ == "RewriteAsserts" for t in shell.ast_transformers) == 1
        result = shell.run_cell("a, b = 3, 4\nassert a + 1 > b", silent=True)
        assert isinstance(result.error_in_exec, AssertionError)
        assert "assert (3 + 1) > 4" in str(result.error_in_exec), str(result.error_in_exec)
        # a cell that starts with a comment: pytest's added imports once ended before they started, and IPython
        # refused the whole cell ("AST node line range (2, 1) is not valid") before running any of it
        ok = shell.run_cell("# a comment first\nx = 1\nif x:\n    assert x == 1, x\n", silent=True)
        assert ok.error_before_exec is None and ok.error_in_exec is None, (ok.error_before_exec, ok.error_in_exec)
        bad = shell.run_cell("# a comment first\nx = 1\nif x:\n    assert x == 2, x\n", silent=True)
        assert isinstance(bad.error_in_exec, AssertionError) and "assert 1 == 2" in str(bad.error_in_exec)
    finally:
        InteractiveShell.clear_instance()


def test_failure_advice_names_the_notebook_cell_and_error():
    from course_lib.tooling.runner import NotebookRun, failure_advice

    run = NotebookRun("09_agentic_rl_rewards", "solutions/09.ipynb", "build/executed/09.ipynb", "failed", 3.0,
                      error_cell=71, error="AssertionError: assert 0.388 > 0.396")
    text = failure_advice([run])
    assert "09_agentic_rl_rewards: open build/executed/09.ipynb at cell 71" in text
    assert "assert 0.388 > 0.396" in text and "docs/claims.md" in text and "/proc/cpuinfo" in text
