"""Lesson 07: the tiny-codes drill — one command from data to a sandbox-evaluated code model.

``python -m course_lib.drill`` (or ``./course drill``) runs the lesson's five steps: download → pipeline
→ SFT → inference → evaluation. Submodules: ``taskgen`` (the tiny-codes-shaped ci sample), ``data``
(step 1), ``run`` (the steps), ``inference`` (step 4), ``extract`` and ``evaluate`` (step 5), ``metrics``
(Pass@1, PPL, FCR, SER, RSR and the lesson's tables), ``store`` (atomic outputs and completion markers).

Introduced in lesson 07.
"""
from course_lib.drill.extract import extract_code, find_code_blocks, has_fenced_code
from course_lib.drill.run import (
    STEPS,
    DrillConfig,
    PrerequisiteError,
    check_prerequisites,
    config_from_profile,
    load_metrics,
    load_report,
    run_drill,
)


def main(argv: list[str] | None = None) -> int:
    """``./course drill`` entry point (see :mod:`course_lib.drill.cli`). Introduced in lesson 07."""
    from course_lib.drill.cli import main as _main

    return _main(argv)


__all__ = ["STEPS", "DrillConfig", "PrerequisiteError", "check_prerequisites", "config_from_profile",
           "extract_code", "find_code_blocks", "has_fenced_code", "load_metrics", "load_report", "main",
           "run_drill"]
