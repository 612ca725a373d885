"""Lesson 10's exercises, in the lesson's order: the three rewards (10-1, the lecture's ``calculate_reward``
among them), the group-relative advantage as TRL computes it (10-2), and the clipped surrogate with two
clip sides as a loss (10-3).
Introduced in lesson 10."""
from __future__ import annotations

from course_lib.exercises import Exercise
from course_lib.exercises.checks import numbers_close


def reference_trl_advantages(rewards, group_size):
    from course_lib.rl.mechanics import trl_group_advantages

    return trl_group_advantages(rewards, group_size).tolist()


def reference_clipped_loss(ratios, advantages, eps_low=0.2, eps_high=0.28):
    from course_lib.rl.mechanics import clipped_token_loss

    return clipped_token_loss(ratios, advantages, eps_low, eps_high)[0].tolist()


def reference_rl_reward(kind, status, passed, total):
    from course_lib.rl.mechanics import rl_reward

    return rl_reward(kind, status, passed, total)


def _close(got, expected):
    return numbers_close(got, expected, 1e-6)


EXERCISES = [
    Exercise(
        id="10-2", name="my_trl_advantages", reference=reference_trl_advantages, compare=_close,
        description="consecutive groups of group_size: (r - group mean) / (sample std of the group + 1e-4)",
        cases=[([1, 0, 0, 1], 4),
               ([1, 0, 0, 1, 1, 1, 1, 1], 4),                 # the second group has no signal: 0 everywhere
               ([1, 0, 0, 0, 1, 1, 0, 1], 2),                 # groups are consecutive, not strided
               ([0.25, 0.5, -1.0, -0.5, 1.0, 0.0], 3),        # the lecture's reward: negative values
               ([0, 0, 0, 1, 0, 0, 0, 0], 8)]),               # one success in K = 8
    Exercise(
        id="10-3", name="my_clipped_loss", reference=reference_clipped_loss, compare=_close,
        description="per token -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A): two clip sides, as a loss",
        cases=[([1.5], [1.0]),                                 # A > 0, high ratio: the HIGH side (1.28) binds
               ([0.5], [-1.0]),                                # A < 0, low ratio: the LOW side (0.8) binds
               ([1.5], [-1.0]),                                # A < 0, high ratio: unclipped (pessimistic)
               ([0.5], [1.0]),                                 # A > 0, low ratio: unclipped
               ([1.25, 0.85, 1.0], [2.0, -1.0, 0.5]),          # inside [0.8, 1.28]: -r A
               ([1.25, 0.75], [1.0, -1.0], 0.1, 0.2),          # other sides: 1.2 and 0.9 bind
               ([1.3, 0.7], [1.0, -1.0], 0.2, 0.2)]),          # symmetric (PPO's single epsilon)
    Exercise(
        id="10-1", name="my_rl_reward", reference=reference_rl_reward, compare=_close,
        description="pass: 1 iff the run passed and every planned test passed; fraction: share passed, 0 on a "
                    "syntax error, a crash or a limit; lecture: -1 syntax error / no code, -0.5 runtime error / "
                    "timeout / memory_limit / output_limit, else the share passed; no planned test: the status decides",
        cases=[("pass", "passed", 4, 4), ("pass", "failed", 3, 4), ("fraction", "failed", 3, 4),
               ("fraction", "syntax_error", 0, 4), ("fraction", "timeout", 0, 4),
               ("lecture", "syntax_error", 0, 4), ("lecture", "no_code", 0, 4), ("lecture", "runtime_error", 0, 4),
               ("lecture", "timeout", 0, 4), ("lecture", "failed", 1, 4), ("lecture", "passed", 5, 5),
               ("lecture", "failed", 0, 3),
               # the statuses the sandbox really returns: memory and output limits are crashes, like a timeout
               ("lecture", "memory_limit", 0, 3), ("lecture", "output_limit", 2, 2), ("fraction", "memory_limit", 1, 3),
               ("fraction", "output_limit", 2, 2), ("pass", "memory_limit", 3, 3), ("pass", "output_limit", 4, 4),
               # a `pass` reward reads the status, not only the counts (an OOM kill after the last test)
               ("pass", "failed", 4, 4), ("pass", "timeout", 2, 2), ("pass", "syntax_error", 0, 0),
               # a task with zero planned tests: the status alone decides (no division by zero)
               ("pass", "passed", 0, 0), ("fraction", "passed", 0, 0), ("lecture", "passed", 0, 0),
               ("fraction", "failed", 0, 0), ("lecture", "failed", 0, 0), ("lecture", "runtime_error", 0, 0)]),
]
