"""A student's own workspace: a copy of the student notebooks that git never sees.

``./course lab`` (and ``./course workspace``) copy ``notebooks/*.ipynb`` into ``workspace/`` (ignored by
git; ``$COURSE_WORKSPACE`` chooses another folder) and open JupyterLab there, so a student's answers and
outputs never touch a tracked file and ``git pull`` of a course update never conflicts with them. A copy
is made once per lesson and never overwritten: a lesson the course has changed since the copy is
reported, and ``./course restore NN`` replaces one lesson's copy with the course's (the old copy is kept
in ``workspace/.backup/``). ``./course progress`` reads the saved notebooks and lists, per exercise, the
last check the student ran: ✓ passed, ✗ wrong, ○ not done yet, or not run.

Introduced in lesson 00.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from course_lib.paths import repo_root

MANIFEST = ".course-workspace.json"
BACKUP = ".backup"
_LESSON = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")
_CHECK_CALL = re.compile(r"""exercises\.check\(\s*["'](\d\d-\d+)["']""")


def _course_root() -> Path:
    root = repo_root()
    if root is None:
        raise FileNotFoundError("the workspace needs a clone of the course repository (its notebooks/ folder)")
    return root


def workspace_dir() -> Path:
    """The student's workspace: ``$COURSE_WORKSPACE`` if set, else ``<repo>/workspace`` (ignored by git).
    Introduced in lesson 00."""
    env = os.environ.get("COURSE_WORKSPACE")
    return Path(env).expanduser().resolve() if env else _course_root() / "workspace"


def course_notebooks() -> dict[str, Path]:
    """The course's student notebooks by lesson number ("04" → ``notebooks/04_fill_in_the_middle.ipynb``)."""
    found = {}
    for path in sorted((_course_root() / "notebooks").glob("*.ipynb")):
        m = _LESSON.match(path.name)
        if m:
            found[m.group(1)] = path
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _read_manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_manifest(folder: Path, manifest: dict) -> None:
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")


@dataclass
class WorkspaceReport:
    """What :func:`prepare_workspace` did: the folder, the lessons copied now, the lessons the course
    changed since the student's copy was made (``./course restore NN`` takes the new version)."""

    folder: Path
    copied: list[str]
    updated_in_course: list[str]


def prepare_workspace(folder: str | Path | None = None) -> WorkspaceReport:
    """Create the workspace (default :func:`workspace_dir`) and copy in every student notebook it does not
    hold yet; never overwrite a notebook that is there. Introduced in lesson 00."""
    folder = Path(folder) if folder else workspace_dir()
    folder.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(folder)
    copied, updated = [], []
    for lesson, source in course_notebooks().items():
        target = folder / source.name
        digest = _digest(source)
        if not target.exists():
            shutil.copyfile(source, target)
            manifest[source.name] = digest
            copied.append(lesson)
        elif manifest.get(source.name) not in (None, digest):
            updated.append(lesson)
        else:
            manifest.setdefault(source.name, digest)
    _write_manifest(folder, manifest)
    return WorkspaceReport(folder, copied, updated)


def _lesson_number(lesson: str | int) -> str:
    text = str(lesson).strip()
    m = re.match(r"^(\d{1,2})(?:_|$|-)", text)
    if not m:
        raise ValueError(f"not a lesson number: {lesson!r} (write e.g. 04)")
    return m.group(1).zfill(2)


def restore_lesson(lesson: str | int, folder: str | Path | None = None) -> tuple[Path, Path | None]:
    """Replace the workspace's copy of one lesson (``"04"``) with the course's student notebook.
    Returns (the fresh copy, where the old one was moved — ``<workspace>/.backup/NN_slug.<time>.ipynb`` —
    or None when there was none). Introduced in lesson 00."""
    number = _lesson_number(lesson)
    notebooks = course_notebooks()
    if number not in notebooks:
        raise ValueError(f"no lesson {number}; lessons: {', '.join(notebooks)}")
    source = notebooks[number]
    folder = Path(folder) if folder else workspace_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    backup = None
    if target.exists():
        backup = folder / BACKUP / f"{target.stem}.{time.strftime('%Y%m%d-%H%M%S')}.ipynb"
        backup.parent.mkdir(exist_ok=True)
        n = 1
        while backup.exists():
            backup = backup.with_name(f"{target.stem}.{time.strftime('%Y%m%d-%H%M%S')}-{n}.ipynb")
            n += 1
        shutil.move(str(target), backup)
    shutil.copyfile(source, target)
    manifest = _read_manifest(folder)
    manifest[source.name] = _digest(source)
    _write_manifest(folder, manifest)
    return target, backup


# --- progress -------------------------------------------------------------------------------------

STATUS_TEXT = {"passed": "✓ 通过 (passed)", "wrong": "✗ 有错 (wrong)", "todo": "○ 还没做 (not done yet)",
               "not_run": "· 还没运行 (not run)", "no_notebook": "- 不在 workspace 里 (no notebook)"}


@dataclass
class ExerciseStatus:
    """One exercise's state in the student's saved notebook: ``status`` is one of ``passed``, ``wrong``,
    ``todo`` (not done yet), ``not_run`` (the check cell has no output), ``no_notebook``."""

    id: str
    name: str
    notebook: str
    status: str


def _outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(str(out.get("text", "")) if isinstance(out.get("text"), str) else "".join(out.get("text", [])))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename', '')}: {out.get('evalue', '')}")
        else:
            text = out.get("data", {}).get("text/plain", "")
            parts.append(text if isinstance(text, str) else "".join(text))
    return "".join(parts)


def _status_from_output(text: str, name: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        for mark, status in (("✓", "passed"), ("✗", "wrong"), ("○", "todo")):
            if line.startswith(f"{mark} {name}:"):
                return status
    return "not_run"


def exercise_progress(folder: str | Path | None = None) -> list[ExerciseStatus]:
    """Every exercise of the course with its state in the workspace's saved notebooks (the output of its
    ``exercises.check("NN-k", ...)`` cell the last time the student ran and saved it). Introduced in lesson 00."""
    from course_lib import exercises

    folder = Path(folder) if folder else workspace_dir()
    notebooks = course_notebooks()
    cells_by_lesson: dict[str, dict[str, str]] = {}
    result = []
    ordered = sorted(exercises.all_exercises().items(), key=lambda kv: tuple(int(x) for x in kv[0].split("-")))
    for ex_id, ex in ordered:
        lesson = ex_id.split("-")[0]
        name = notebooks[lesson].name if lesson in notebooks else f"{lesson}_*.ipynb"
        path = folder / name
        if not path.exists():
            result.append(ExerciseStatus(ex_id, ex.name, name, "no_notebook"))
            continue
        if lesson not in cells_by_lesson:
            try:
                nb = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                nb = {"cells": []}
            found: dict[str, str] = {}
            for cell in nb.get("cells", []):
                if cell.get("cell_type") != "code":
                    continue
                source = cell.get("source", "")
                source = source if isinstance(source, str) else "".join(source)
                for called in _CHECK_CALL.findall(source):
                    found[called] = found.get(called, "") + _outputs_text(cell)
            cells_by_lesson[lesson] = found
        found = cells_by_lesson[lesson]
        status = _status_from_output(found[ex_id], ex.name) if ex_id in found else "not_run"
        result.append(ExerciseStatus(ex_id, ex.name, name, status))
    return result


def format_progress(statuses: list[ExerciseStatus]) -> str:
    """The progress table ``./course progress`` prints, with a one-line summary. Introduced in lesson 00."""
    lines = [f"{'exercise':<9} {'function':<28} status"]
    for s in statuses:
        lines.append(f"{s.id:<9} {s.name:<28} {STATUS_TEXT[s.status]}")
    passed = sum(s.status == "passed" for s in statuses)
    lines.append(f"\n通过 {passed}/{len(statuses)} 个练习 (passed). The state is what each notebook's check cell "
                 "printed when you last ran and saved it.")
    return "\n".join(lines)


# --- command line ---------------------------------------------------------------------------------

def _print_report(report: WorkspaceReport) -> None:
    print(f"workspace: {report.folder}")
    if report.copied:
        print(f"  copied from the course: lessons {', '.join(report.copied)}")
    if report.updated_in_course:
        print(f"  the course has a newer version of lessons {', '.join(report.updated_in_course)}; your copies "
              "are kept. `./course restore NN` takes the new one (your copy goes to .backup/)")


def workspace_main(argv: list[str] | None = None) -> int:
    """``./course workspace``: create or top up the student's workspace. Introduced in lesson 00."""
    p = argparse.ArgumentParser(
        prog="course workspace",
        description="Create your own workspace (default workspace/ in the clone, ignored by git; "
                    "$COURSE_WORKSPACE chooses another folder) and copy in every student notebook it does not "
                    "hold yet. Your notebooks are never overwritten; `./course lab` does this first.")
    p.parse_args(argv)
    _print_report(prepare_workspace())
    return 0


def restore_main(argv: list[str] | None = None) -> int:
    """``./course restore NN``: take the course's version of one lesson again. Introduced in lesson 00."""
    p = argparse.ArgumentParser(
        prog="course restore",
        description="Replace your workspace copy of one lesson with the course's fresh student notebook. "
                    "Your old copy is moved to workspace/.backup/ (nothing is deleted).")
    p.add_argument("lesson", help="the lesson number, e.g. 04")
    args = p.parse_args(argv)
    try:
        fresh, backup = restore_lesson(args.lesson)
    except ValueError as exc:
        print(f"course restore: {exc}", file=sys.stderr)
        return 2
    print(f"restored {fresh}" + (f"; your previous copy is {backup}" if backup else ""))
    return 0


def progress_main(argv: list[str] | None = None) -> int:
    """``./course progress``: which exercises pass in the workspace. Introduced in lesson 00."""
    p = argparse.ArgumentParser(
        prog="course progress",
        description="List every exercise with its state in your workspace notebooks (what its check cell "
                    "printed the last time you ran it and saved the notebook).")
    p.parse_args(argv)
    folder = workspace_dir()
    if not folder.exists():
        print(f"no workspace yet ({folder}); `./course lab` creates it")
        return 0
    print(format_progress(exercise_progress(folder)))
    return 0
