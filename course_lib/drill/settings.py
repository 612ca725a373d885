"""Deprecated alias of :mod:`course_lib.drill.config` (renamed so that ``course_lib.drill.settings`` no longer
collides with ``course_lib.rl.settings``). Kept for one release.

Introduced in lesson 07.
"""
import warnings

from course_lib.drill.config import (
    VARIANT_LABELS,
    VARIANTS,
    DrillConfig,
    Need,
    PrerequisiteError,
    Step,
    Variant,
    base_model_path,
    base_model_problems,
    config_from_profile,
    default_root,
    trained_by,
    use_lazyllm_path,
)

warnings.warn("course_lib.drill.settings is deprecated: use course_lib.drill.config", DeprecationWarning,
              stacklevel=2)

__all__ = ["VARIANTS", "VARIANT_LABELS", "DrillConfig", "Need", "PrerequisiteError", "Step", "Variant",
           "base_model_path", "base_model_problems", "config_from_profile", "default_root", "trained_by",
           "use_lazyllm_path"]
