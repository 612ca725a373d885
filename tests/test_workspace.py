"""The student's workspace: own copies of the student notebooks outside git, never overwritten, one lesson
restorable, progress read from the saved notebooks; the course command's help describes each command."""
from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from course_lib.tooling import workspace as ws


@pytest.fixture
def folder(tmp_path, monkeypatch):
    target = tmp_path / "ws"
    monkeypatch.setenv("COURSE_WORKSPACE", str(target))
    return target


def test_workspace_copies_every_student_notebook_once_and_never_overwrites(folder, repo):
    report = ws.prepare_workspace()
    names = sorted(p.name for p in folder.glob("*.ipynb"))
    assert names == sorted(p.name for p in (repo / "notebooks").glob("*.ipynb"))
    assert report.folder == folder and report.copied[0] == "00" and not report.updated_in_course
    mine = folder / names[0]
    mine.write_text(mine.read_text(encoding="utf-8").replace("YOUR CODE HERE", "MY ANSWER"), encoding="utf-8")
    again = ws.prepare_workspace()
    assert again.copied == [] and "MY ANSWER" in mine.read_text(encoding="utf-8")
    (folder / names[1]).unlink()                      # a deleted lesson comes back
    assert ws.prepare_workspace().copied == [names[1][:2]]


def test_a_course_update_is_reported_not_copied_over_the_students_work(folder):
    ws.prepare_workspace()
    manifest = json.loads((folder / ws.MANIFEST).read_text())
    name = sorted(manifest)[0]
    manifest[name] = "an-older-version"               # as if the course changed after the copy
    (folder / ws.MANIFEST).write_text(json.dumps(manifest))
    before = (folder / name).read_bytes()
    report = ws.prepare_workspace()
    assert report.updated_in_course == [name[:2]] and (folder / name).read_bytes() == before


def test_restore_takes_the_course_version_and_keeps_the_old_copy(folder, repo):
    ws.prepare_workspace()
    course = ws.course_notebooks()["03"]
    mine = folder / course.name
    mine.write_text("{}", encoding="utf-8")
    fresh, backup = ws.restore_lesson("3")
    assert fresh == mine and fresh.read_bytes() == course.read_bytes()
    assert backup.parent == folder / ws.BACKUP and backup.read_text() == "{}"
    _, second = ws.restore_lesson("03")
    assert second != backup and second.exists()
    with pytest.raises(ValueError, match="no lesson 99"):
        ws.restore_lesson("99")


def _answer(path, exercise_id, text):
    """Give the check cell of ``exercise_id`` in the notebook ``path`` the output ``text``."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and f'exercises.check("{exercise_id}"' in cell.source:
            cell.outputs = [nbformat.v4.new_output("stream", text=text)]
    nbformat.write(nb, path)


def test_progress_reads_what_each_check_printed(folder):
    ws.prepare_workspace()
    lesson0 = folder / ws.course_notebooks()["00"].name
    _answer(lesson0, "00-1", "✓ count_code_lines: 全部 9 个 case 都与参考实现 (reference) 一致。\n")
    _answer(lesson0, "00-2", "✗ choose_profile: 第 1 个 case（共 4 个）与参考实现 (reference) 不同\n")
    lesson9 = folder / ws.course_notebooks()["09"].name
    _answer(lesson9, "09-7", "○ my_gate: 还没做 (not done yet)\n")
    (folder / ws.course_notebooks()["10"].name).unlink()
    status = {s.id: s.status for s in ws.exercise_progress()}
    assert status["00-1"] == "passed" and status["00-2"] == "wrong" and status["09-7"] == "todo"
    assert status["01-1"] == "not_run" and status["10-1"] == "no_notebook"
    table = ws.format_progress(ws.exercise_progress())
    assert "09-7" in table and "通过 1/" in table


def test_the_course_command_describes_each_command(repo, folder):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "course_lib", *args], cwd=repo, capture_output=True,
                              text=True, timeout=120)

    top = run("--help").stdout
    for name in ("lab", "workspace", "restore", "progress", "run", "test", "slides"):
        line = next(ln for ln in top.splitlines() if ln.strip().startswith(name + " "))
        assert len(line.split()) > 3, f"`./course --help` gives {name} no description: {line!r}"
    lab = run("lab", "--help")
    assert lab.returncode == 0 and "usage: course lab" in lab.stdout and "workspace" in lab.stdout
    dry = run("lab", "--dry-run")
    assert dry.returncode == 0 and str(folder) in dry.stdout and "jupyter lab" in dry.stdout
    assert "restore" in run("restore", "--help").stdout and run("progress").returncode == 0
    shell = subprocess.run(["bash", str(repo / "course"), "test", "--help"], capture_output=True, text=True)
    assert shell.returncode == 0 and "usage: ./course test" in shell.stdout


def test_workspace_is_ignored_by_git(repo):
    if not (repo / ".git").exists():
        pytest.skip("not a git clone")
    out = subprocess.run(["git", "check-ignore", "-q", "workspace/00_setup_and_tour.ipynb"], cwd=repo)
    assert out.returncode == 0, "workspace/ must be in .gitignore"
