"""``python -m course_lib <command>`` (usually through ``./course <command>``).

Introduced in lesson 00.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_notebooks(argv: list[str]) -> int:
    from course_lib.tooling.nbtools import build_notebooks

    p = argparse.ArgumentParser(
        prog="course notebooks",
        description="Build solutions/*.ipynb from the lesson sources lessons/*.py, then the student "
                    "versions notebooks/*.ipynb.")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if solutions/ or notebooks/ is out of date")
    args = p.parse_args(argv)
    drifted = build_notebooks(check=args.check)
    verb = "out of date" if args.check else "written"
    for path in drifted:
        print(f"{verb}: {path}")
    if not drifted:
        print("solutions/ and notebooks/ are in sync with lessons/")
    return 1 if (args.check and drifted) else 0


LAB_FLAGS = [
    "--no-browser", "--ip=127.0.0.1",
    # offline: no news feed, no update check, no PyPI look-ups by the extension manager
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
]


# JupyterLab 4 asks "receive official Jupyter news?" unless the notification plugin's `fetchNews` is
# set ("none" = ask is the default; --LabApp.news_url does not stop the prompt). Written as a settings
# override of the environment JupyterLab runs from, before each `./course lab`.
LAB_SETTING_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


def write_lab_overrides(prefix: str | None = None) -> Path:
    """Merge :data:`LAB_SETTING_OVERRIDES` into ``<prefix>/share/jupyter/lab/settings/overrides.json``
    (default ``sys.prefix``) and return its path. Introduced in lesson 00."""
    import json

    path = Path(prefix or sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    current = {}
    if path.exists():
        try:
            current = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            current = {}
    for plugin, values in LAB_SETTING_OVERRIDES.items():
        current.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
    return path


def lab_command(folder: str = "notebooks", extra: list[str] | None = None) -> list[str]:
    """The JupyterLab command line the course uses (works offline, and as root). Introduced in lesson 00."""
    import os

    cmd = [sys.executable, "-m", "jupyter", "lab", folder, *LAB_FLAGS]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd + list(extra or [])


def _cmd_lab(argv: list[str]) -> int:
    """``./course lab``: the student's workspace in JupyterLab (the course's own ``--help``)."""
    import os

    from course_lib.tooling.workspace import _print_report, prepare_workspace

    p = argparse.ArgumentParser(
        prog="course lab",
        description="Open JupyterLab on your own workspace: first copy every student notebook you do not have "
                    "yet from notebooks/ into workspace/ (ignored by git; $COURSE_WORKSPACE chooses another "
                    "folder), never overwriting your copies, then start JupyterLab there with offline-safe "
                    "flags. Open the printed http://127.0.0.1:PORT/lab?token=... URL in your browser; stop "
                    "with Ctrl-C. Arguments after `--` go to JupyterLab.",
        epilog="See also: ./course restore NN (a fresh copy of one lesson), ./course progress (which "
               "exercises pass).")
    p.add_argument("--port", type=int, default=None, help="the port to serve on (JupyterLab default 8888)")
    p.add_argument("--dry-run", action="store_true",
                   help="prepare the workspace and print the JupyterLab command, do not start it")
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    args = p.parse_args(argv)
    report = prepare_workspace()
    _print_report(report)
    if args.port:
        extra = [f"--port={args.port}", *extra]
    cmd = lab_command(str(report.folder), extra)
    print("$ " + " ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    try:
        write_lab_overrides()
    except OSError as exc:
        print(f"course lab: could not write JupyterLab's settings overrides ({exc}); "
              "JupyterLab may ask about news", file=sys.stderr)
    os.chdir(report.folder)
    os.execv(cmd[0], cmd)
    return 0  # pragma: no cover


COMMANDS = {
    "lab": ("open JupyterLab on your own workspace/ (a git-ignored copy of the student notebooks)",
            "course_lib.tooling.cli:_cmd_lab"),
    "workspace": ("create workspace/ or copy in the lessons it lacks (never overwrites your notebooks)",
                  "course_lib.tooling.workspace:workspace_main"),
    "restore": ("restore NN: replace your copy of lesson NN with the course's (old copy kept in .backup/)",
                "course_lib.tooling.workspace:restore_main"),
    "progress": ("list every exercise: passed, wrong, not done yet or not run, in your workspace",
                 "course_lib.tooling.workspace:progress_main"),
    "run": ("run every lesson notebook with papermill, export slides, print a table", "course_lib.tooling.runner:main"),
    "notebooks": ("build solutions/ and notebooks/ from the lesson sources lessons/*.py (course authors)",
                  "course_lib.tooling.cli:_cmd_notebooks"),
    "slides": ("export reveal.js slides that open offline", "course_lib.tooling.slides:main"),
    "env": ("report the environment (packages, GPU, sandbox backends, caches)", "course_lib.tooling.envcheck:main"),
    "model": ("build the course's tiny code model (lesson 04) into the cache", "course_lib.training.tinymodel:main"),
    "drill": ("the tiny-codes drill of lesson 07", "course_lib.drill:main"),
}


def _run_in_repo(name: str, rest: list[str]) -> int:
    """``course test`` / ``course setup`` from the console script: the same as ``./course test|setup``
    (pytest in the repository root with this interpreter; ``scripts/setup.sh`` for this venv)."""
    import os
    import subprocess

    from course_lib.paths import repo_root

    root = repo_root()
    if root is None:
        print(f"`course {name}` needs a clone of the course repository (tests and setup live there)",
              file=sys.stderr)
        return 2
    if name == "test":
        return subprocess.call([sys.executable, "-m", "pytest", *rest], cwd=root)
    env = dict(os.environ, COURSE_VENV=str(Path(sys.prefix)))
    return subprocess.call(["bash", str(root / "scripts" / "setup.sh"), *rest], cwd=root, env=env)


def _skip_rfc3987_grammar() -> None:
    """``import nbformat`` pulls in jsonschema, which imports ``rfc3987_syntax`` (installed through
    jupyterlab's dependencies) only to validate the "iri" string format; building its grammar costs
    ~3 s on 2 cores, more than the rest of papermill's import. Notebook schemas never use that format,
    so the course command tells jsonschema the package is absent (this process only)."""
    # kept on purpose: jsonschema imports rfc3987_syntax at import time (suppressing only ImportError), with no switch
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


HELP_HEAD = """usage: ./course <command> [options]        (./course <command> --help: that command's options)

A student starts with `./course lab` and works in workspace/; an instructor runs `./course run` and
`./course test`. README.md, "Quick start", says what each needs and what to do when something fails.

commands:"""
HELP_TAIL = """
examples:
  ./course lab                 JupyterLab on your workspace (prints the URL to open)
  ./course restore 04          a fresh copy of lesson 04 (yours goes to workspace/.backup/)
  ./course progress            which exercises pass
  ./course run --only 00,01    execute two lessons, write build/, print a table
  ./course test tests/test_checks.py"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(HELP_HEAD)
        print("  setup      set up the virtual environments (done automatically by ./course)")
        print("  test       run the test suite (pytest; pass pytest arguments, e.g. tests/test_checks.py)")
        for name, (text, _) in COMMANDS.items():
            print(f"  {name:<10} {text}")
        print(HELP_TAIL)
        return 0
    name, rest = argv[0], argv[1:]
    if name in ("test", "setup"):
        return _run_in_repo(name, rest)
    if name not in COMMANDS:
        print(f"unknown command {name!r}; commands: setup, test, {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    if name in ("run", "slides"):
        _skip_rfc3987_grammar()
    module, func = COMMANDS[name][1].split(":")
    import importlib

    return int(importlib.import_module(module).__getattribute__(func)(rest) or 0)
