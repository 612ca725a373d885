"""Deprecated alias of :mod:`course_lib.rl.drill_step` (the drill's step 6 moved to lesson 10's package,
so that ``course_lib.drill.rl`` no longer shadows ``course_lib.rl``). Kept for one release.

Introduced in lesson 10.
"""
import warnings

from course_lib.rl.drill_step import STEP, drill_rl_settings, no_reward_reason, rl_unavailable, step_rl

warnings.warn("course_lib.drill.rl is deprecated: use course_lib.rl.drill_step", DeprecationWarning, stacklevel=2)

__all__ = ["STEP", "drill_rl_settings", "no_reward_reason", "rl_unavailable", "step_rl"]
