"""``python -m course_lib <command>`` (usually through ``./course <command>``).

Introduced in lesson 00.
"""
from __future__ import annotations

import argparse
import sys


def _cmd_student(argv: list[str]) -> int:
    from course_lib.nbtools import generate_student_notebooks

    p = argparse.ArgumentParser(prog="course student",
                                description="Generate notebooks/ (student versions) from solutions/.")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if notebooks/ is out of date")
    args = p.parse_args(argv)
    drifted = generate_student_notebooks(check=args.check)
    verb = "out of date" if args.check else "written"
    for path in drifted:
        print(f"{verb}: {path}")
    if not drifted:
        print("notebooks/ is in sync with solutions/")
    return 1 if (args.check and drifted) else 0


COMMANDS = {
    "student": ("generate student notebooks from solutions/", "course_lib.cli:_cmd_student"),
    "run": ("run every lesson notebook with papermill, export slides, print a table", "course_lib.runner:main"),
    "slides": ("export reveal.js slides that open offline", "course_lib.slides:main"),
    "env": ("report the environment (packages, GPU, sandbox backends, caches)", "course_lib.envcheck:main"),
    "model": ("build the course's tiny code model (lesson 04) into the cache", "course_lib.tinymodel:main"),
    "drill": ("the tiny-codes drill of lesson 07", "course_lib.drill:main"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print("usage: ./course <command> [options]\n\ncommands:")
        print("  setup    set up the virtual environment (done automatically)")
        print("  test     run the whole test suite (pytest)")
        for name, (text, _) in COMMANDS.items():
            print(f"  {name:<8} {text}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}; commands: setup, test, {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module, func = COMMANDS[name][1].split(":")
    import importlib

    return int(importlib.import_module(module).__getattribute__(func)(rest) or 0)
