"""Deprecated alias of :mod:`course_lib.evaluation.generation` (moved to lesson 06, which samples a real model and
judges its answers, so that lesson 06 imports no later lesson). Kept for one release.

Introduced in lesson 07.
"""
import warnings

from course_lib.evaluation.generation import *  # noqa: F401,F403

warnings.warn("course_lib.drill.generation is deprecated: use course_lib.evaluation.generation", DeprecationWarning,
              stacklevel=2)
