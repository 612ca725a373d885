"""The sandbox runtime: numpy and pandas for sampled programs, read-only, on both backends.

The lecture's ``docker run python`` image lets a program ``import numpy``; real answers in the course's
data (tiny-codes) do. The sandbox's interpreter is the system Python, so :func:`build_runtime` copies the
installed distributions of :data:`PACKAGES` (from the course's environment, same Python minor version)
into ``/var/lib/course-sandbox/runtime/site-packages``. The bwrap backend mounts that folder read-only
at the system Python's ``/usr/local/lib/python3.X/dist-packages`` (on ``site``'s path), and the offline
Docker image carries the same files. ``scripts/setup.sh`` runs ``python -m course_lib.evaluation.sandbox runtime``.

Introduced in lesson 06.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = ("numpy", "pandas", "python-dateutil", "six", "pytz", "tzdata")
RUNTIME_DIR = Path(os.environ.get("SANDBOX_RUNTIME", "/var/lib/course-sandbox/runtime"))


def sandbox_python() -> Path:
    """The interpreter that runs sampled code: ``$SANDBOX_PYTHON``, else the system ``/usr/bin/python3``,
    else the base (non-venv) interpreter of this Python. Never the course's virtual environment.
    Introduced in lesson 06."""
    env = os.environ.get("SANDBOX_PYTHON")
    candidates = [env] if env else ["/usr/bin/python3", "/usr/local/bin/python3",
                                    os.path.join(sys.base_prefix, "bin", "python3")]
    for cand in candidates:
        if cand and os.access(cand, os.X_OK):
            return Path(cand)
    raise FileNotFoundError("no Python for the sandbox: install python3 or set SANDBOX_PYTHON=/path/to/python3")


def runtime_site_packages() -> Path | None:
    """The runtime's ``site-packages`` when it has been built, else None. Introduced in lesson 06."""
    path = RUNTIME_DIR / "site-packages"
    return path if (path / ".complete").exists() else None


def _python_minor(python: Path) -> str:
    out = subprocess.run([str(python), "-I", "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def build_runtime(python: Path | None = None) -> Path:
    """Copy :data:`PACKAGES` (as installed for this Python) into the runtime folder, atomically, and make
    it read-only. The sandbox's Python must have the same minor version (compiled extensions).
    Returns the ``site-packages`` path. Introduced in lesson 06."""
    python = Path(python or sandbox_python())
    mine = "%d.%d" % sys.version_info[:2]
    theirs = _python_minor(python)
    if mine != theirs:
        raise RuntimeError(f"the sandbox's Python is {theirs} but the course's is {mine}: numpy/pandas built "
                           f"for {mine} cannot load there; set SANDBOX_PYTHON to a Python {mine}")
    tmp = RUNTIME_DIR / "site-packages.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in PACKAGES:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            if name in ("numpy", "pandas"):
                raise RuntimeError(f"{name} is not installed in the course's environment: pip install {name}")
            continue
        base = Path(dist.locate_file(""))
        for f in dist.files or []:
            src = base / f
            if "__pycache__" in f.parts or not src.is_file() or ".." in f.parts:
                continue
            dst = tmp / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    (tmp / ".complete").write_text(" ".join(PACKAGES) + "\n")
    for root, dirs, files in os.walk(tmp):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o555)
        for n in files:
            os.chmod(os.path.join(root, n), 0o444)
    # A folder swap, not a file write (so not course_lib.store.atomic_write_text): the old read-only
    # folder is moved aside, the new one renamed into place, the old one removed.
    final = RUNTIME_DIR / "site-packages"
    old = RUNTIME_DIR / "site-packages.old"
    if final.exists():
        _rmtree_ro(old)
        os.replace(final, old)
    os.replace(tmp, final)
    _rmtree_ro(old)
    return final


def _rmtree_ro(path: Path) -> None:
    if not path.exists():
        return
    for root, dirs, _ in os.walk(path):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
    os.chmod(path, 0o755)
    shutil.rmtree(path)
