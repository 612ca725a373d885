"""Deprecated alias of :mod:`course_lib.evaluation.vllm_engine` (moved to lesson 06, which samples a real model and
judges its answers, so that lesson 06 imports no later lesson). Kept for one release.

Introduced in lesson 07.
"""
import warnings

from course_lib.evaluation.vllm_engine import *  # noqa: F401,F403

warnings.warn("course_lib.drill.vllm_engine is deprecated: use course_lib.evaluation.vllm_engine", DeprecationWarning,
              stacklevel=2)
