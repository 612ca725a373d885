"""The student's path in a real browser: `./course lab` serves the student's own workspace, a student
notebook opens in JupyterLab (headless Chromium) with the course kernel, an exercise answered wrong shows
✗ with the failing case and answered right shows ✓, the saved notebook lands in the workspace,
`./course progress` sees it — and no tracked file of the clone changed."""
from __future__ import annotations

import hashlib
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

WRONG = "def count_code_lines(source):\n    return len(source.splitlines())\n"
RIGHT = ("def count_code_lines(source):\n"
         "    return sum(1 for ln in source.splitlines() if ln.strip() and not ln.strip().startswith('#'))\n")

# JupyterLab's application object (exposed with --LabApp.expose_app_in_browser): the open notebook panel,
# its cells, and the commands the menus run.
_PANEL = "const app = window.jupyterapp; const panel = app && app.shell.currentWidget;"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tracked_state(repo) -> tuple[str, dict]:
    """`git status` of the tracked files and the digest of every course notebook."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                            capture_output=True, text=True).stdout
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((repo / "notebooks").glob("*.ipynb"))}
    return status, digests


def _wait(driver, script: str, what: str, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(_PANEL + script)
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"JupyterLab: timed out waiting for {what}")


def _cell_index(driver, needle: str) -> int:
    index = driver.execute_script(_PANEL + """
        const cells = panel.content.widgets;
        for (let i = 0; i < cells.length; i++)
          if (cells[i].model.type === 'code' && cells[i].model.sharedModel.getSource().includes(arguments[0])) return i;
        return -1;""", needle)
    assert index >= 0, f"no code cell containing {needle!r}"
    return index


def _run_cell(driver, index: int, source: str | None = None) -> str:
    """Run cell ``index`` (after replacing its source) through JupyterLab's own command; its output text."""
    driver.execute_script(_PANEL + """
        const cell = panel.content.widgets[arguments[0]];
        if (arguments[1] !== null) cell.model.sharedModel.setSource(arguments[1]);
        cell.model.sharedModel.transact(() => {});
        window.__courseRunBefore = cell.model.executionCount;
        cell.model.clearExecution && cell.model.clearExecution();
        panel.content.activeCellIndex = arguments[0];
        app.commands.execute('notebook:run-cell');""", index, source)
    return _wait(driver, """
        const cell = panel.content.widgets[arguments[0]];
        const busy = panel.sessionContext.session.kernel.status !== 'idle';
        if (busy || !cell.model.executionCount) return null;
        const outs = cell.model.outputs.toJSON();
        return outs.map(o => [].concat(o.text || (o.data && o.data['text/plain']) || o.evalue || '').join('')).join('') || ' ';
        """.replace("arguments[0]", str(index)), f"cell {index} to run", timeout=120)


@pytest.mark.slow
def test_a_student_answers_an_exercise_in_jupyterlab_without_touching_tracked_files(repo, tmp_path):
    from course_lib.tooling.slides import SlidesError, browser
    from course_lib.tooling.workspace import exercise_progress

    if not (repo / ".git").exists():
        pytest.skip("not a git clone")
    before = _tracked_state(repo)
    workspace = tmp_path / "workspace"
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, COURSE_WORKSPACE=str(workspace), JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"))
    log = (tmp_path / "lab.log").open("w")
    lab = subprocess.Popen([sys.executable, "-m", "course_lib", "lab", "--port", str(port), "--",
                            f"--IdentityProvider.token={token}", "--LabApp.expose_app_in_browser=True",
                            "--ServerApp.port_retries=0"],
                           cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    driver = None
    try:
        for _ in range(240):  # the server answers in a few seconds; 2 busy cores: give it a minute
            if lab.poll() is not None:
                pytest.fail("`./course lab` exited: " + (tmp_path / "lab.log").read_text()[-2000:])
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        name = "00_setup_and_tour.ipynb"
        assert (workspace / name).exists(), "`./course lab` did not copy the student notebooks into the workspace"
        try:
            driver = browser(1280, 720)
        except SlidesError as exc:
            pytest.fail(str(exc))
        driver.get(f"http://127.0.0.1:{port}/lab/tree/{name}?token={token}")
        _wait(driver, "return panel && panel.context && panel.context.path === arguments[0] "
                      "&& panel.sessionContext.session && panel.sessionContext.session.kernel "
                      "&& panel.sessionContext.session.kernel.status === 'idle' "
                      "&& panel.sessionContext.kernelDisplayName;".replace("arguments[0]", repr(name)),
              "the notebook and its kernel", timeout=120)
        kernel = driver.execute_script(_PANEL + "return panel.sessionContext.session.kernel.name;")
        assert kernel == "code-llm-course", f"the notebook opened with kernel {kernel!r}, not the course's"
        _run_cell(driver, _cell_index(driver, "from course_lib import exercises"))
        exercise = _cell_index(driver, "def count_code_lines")
        check = _cell_index(driver, 'exercises.check("00-1"')
        _run_cell(driver, exercise, WRONG)
        wrong = _run_cell(driver, check)
        assert "✗ count_code_lines" in wrong and "input:" in wrong and "expected:" in wrong and "got:" in wrong, wrong
        _run_cell(driver, exercise, RIGHT)
        right = _run_cell(driver, check)
        assert "✓ count_code_lines" in right, right
        driver.execute_script(_PANEL + "app.commands.execute('docmanager:save');")
        _wait(driver, "return !panel.context.model.dirty;", "the notebook to be saved")
        saved = (workspace / name).read_text(encoding="utf-8")
        assert "✓ count_code_lines" in saved and "sum(1 for ln" in saved
        status = {s.id: s.status for s in exercise_progress(workspace)}
        assert status["00-1"] == "passed"
    finally:
        if driver is not None:
            driver.quit()
        lab.terminate()
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            lab.kill()
        log.close()
    assert _tracked_state(repo) == before, "the student's session changed a tracked file of the clone"
