"""Where the course keeps its files: the repository, the course cache and the build folder.

Introduced in lesson 00.
"""
from __future__ import annotations

import os
from pathlib import Path

_PKG_DIR = Path(__file__).resolve().parent


def repo_root() -> Path | None:
    """The course repository (the folder holding ``pyproject.toml`` beside ``course_lib/``), or None
    when course_lib was installed without the repository. Introduced in lesson 00."""
    root = _PKG_DIR.parent
    if (root / "pyproject.toml").exists() and (root / "solutions").is_dir():
        return root
    return None


def cache_dir(*parts: str, create: bool = True) -> Path:
    """The course cache, where each lesson writes its artefact for the next ones.

    ``$COURSE_CACHE_DIR`` if set, else ``<repo>/.cache/course`` (ignored by git), else
    ``~/.cache/code-llm-course``. ``cache_dir("corpus")`` gives a sub-folder. Introduced in lesson 00.
    """
    env = os.environ.get("COURSE_CACHE_DIR")
    if env:
        base = Path(env)
    elif repo_root() is not None:
        base = repo_root() / ".cache" / "course"
    else:
        base = Path.home() / ".cache" / "code-llm-course"
    path = base.joinpath(*parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def side_venv(name: str, env_var: str) -> Path:
    """Where a side environment of the course lives (a venv beside the course's own, for tools whose pins
    clash with it): ``$<env_var>`` if set, else ``<repo>/.venv-<name>``, else ``<course cache>/<name>/venv``
    when course_lib is installed without the repository. Introduced in lesson 02."""
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    root = repo_root()
    return root / f".venv-{name}" if root is not None else cache_dir(name, create=True) / "venv"


def venv_python(venv: Path) -> Path:
    """The interpreter of the virtual environment ``venv``. Introduced in lesson 02."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def build_dir(*parts: str, create: bool = True) -> Path:
    """Where the course command writes executed notebooks and slides (``$COURSE_BUILD_DIR`` or
    ``<repo>/build``). Introduced in lesson 00."""
    env = os.environ.get("COURSE_BUILD_DIR")
    if env:
        base = Path(env)
    elif repo_root() is not None:
        base = repo_root() / "build"
    else:
        base = Path.cwd() / "build"
    path = base.joinpath(*parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def assets_dir(*parts: str) -> Path:
    """The repository's ``assets/`` folder (small data the ci profile needs). Introduced in lesson 00."""
    root = repo_root()
    if root is None:
        raise FileNotFoundError(
            "assets/ is only available from a clone of the course repository; "
            "clone it and run `pip install -e .` there")
    return root.joinpath("assets", *parts)


def display_path(path: str | os.PathLike) -> str:
    """``path`` as a notebook should print it: relative to the course cache (``<cache>/...``), the
    repository (``<repo>/...``) or the home folder (``~/...``), so outputs hold no machine's
    absolute paths. Introduced in lesson 00."""
    p = Path(path).absolute()
    for label, base in (("<cache>", cache_dir(create=False)), ("<repo>", repo_root()), ("~", Path.home())):
        if base is None:
            continue
        try:
            return f"{label}/{p.relative_to(Path(base).absolute()).as_posix()}"
        except ValueError:
            continue
    return str(path)
