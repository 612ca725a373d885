"""Deprecated alias of :mod:`course_lib.drill.orchestrate` (renamed so that ``course_lib.drill.run`` no longer
collides with ``course_lib.evaluation.sandbox.run``). Kept for one release.

Introduced in lesson 07.
"""
import warnings

from course_lib.drill.orchestrate import (
    DRILL_STEPS,
    STEPS,
    check_prerequisites,
    load_metrics,
    load_report,
    parse_steps,
    plan_steps,
    run_drill,
    step_settings,
)

warnings.warn("course_lib.drill.run is deprecated: use course_lib.drill.orchestrate", DeprecationWarning,
              stacklevel=2)

__all__ = ["DRILL_STEPS", "STEPS", "check_prerequisites", "load_metrics", "load_report", "parse_steps",
           "plan_steps", "run_drill", "step_settings"]
