"""The three formulas of lesson 10, written out in numpy: what TRL's ``GRPOTrainer`` computes, small enough to
read and to check by hand (the lesson's exercises compare a student's version with these).

* :func:`trl_group_advantages` — the group-relative advantage as TRL 1.16 computes it with
  ``scale_rewards="group"``: groups are K *consecutive* rollouts, ``(r - group mean) / (group std + 1e-4)``
  with the sample standard deviation (Bessel's correction, TRL's ``nanstd``);
* :func:`clipped_token_loss` — the clipped surrogate with two clip sides (``epsilon`` below 1,
  ``epsilon_high`` above; DAPO's clip-higher), as a loss (minus PPO's objective), with the tokens where
  each side binds (what ``clip_low_fraction`` / ``clip_high_fraction`` of ``train_log.json`` count);
* :func:`rl_reward` — the three rewards compared, from a run's status and its tests' count.

Introduced in lesson 10.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from course_lib.evaluation.rewards import CRASH_STATUSES, SYNTAX_STATUSES, shaped_reward

TRL_ADVANTAGE_EPS = 1e-4
# statuses of a sandbox run and the lecture's penalty for each failure kind (the one reward module's)
SYNTAX_LIKE = SYNTAX_STATUSES        # -1: nothing ran
RUNTIME_LIKE = CRASH_STATUSES        # -0.5: it crashed, hung or went over a limit


def trl_group_advantages(rewards: Sequence[float], group_size: int, eps: float = TRL_ADVANTAGE_EPS) -> np.ndarray:
    """Per-rollout advantages of a flat batch whose consecutive ``group_size`` rollouts answer one prompt:
    ``(r - mean of its group) / (sample std of its group + eps)``. A group whose rewards are all equal
    gets 0 everywhere (no signal). Introduced in lesson 10."""
    r = np.asarray(rewards, dtype=np.float64)
    if group_size < 2 or r.size % group_size:
        raise ValueError(f"{r.size} rewards do not split into groups of {group_size} (group_size >= 2)")
    g = r.reshape(-1, group_size)
    mean = g.mean(axis=1, keepdims=True)
    std = g.std(axis=1, ddof=1, keepdims=True)
    return ((g - mean) / (std + eps)).reshape(-1)


def clipped_token_loss(ratios: Sequence[float], advantages: Sequence[float], eps_low: float = 0.2,
                       eps_high: float = 0.28) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(per-token loss, low side binds, high side binds) of ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)``.

    The low side binds where ``r < 1 - eps_low`` and ``A < 0`` (the update would push an already less
    likely bad token further down), the high side where ``r > 1 + eps_high`` and ``A > 0``; there the
    gradient is 0. Introduced in lesson 10."""
    r = np.asarray(ratios, dtype=np.float64)
    a = np.asarray(advantages, dtype=np.float64)
    loss = -np.minimum(r * a, np.clip(r, 1 - eps_low, 1 + eps_high) * a)
    return loss, (r < 1 - eps_low) & (a < 0), (r > 1 + eps_high) & (a > 0)


def rl_reward(kind: str, status: str, passed: int, total: int) -> float:
    """The reward ``kind`` (``pass``, ``fraction``, ``lecture``) of a run with sandbox ``status`` whose
    program passed ``passed`` of ``total`` planned tests: the one reward module's
    :func:`course_lib.evaluation.rewards.shaped_reward`. ``lecture`` is the lecture's ``calculate_reward``:
    -1 for a syntax error (or no code), -0.5 for a runtime error (or an exit at load, a timeout, a memory
    or output limit), else the share passed; ``fraction`` the same with the penalties at 0; ``pass`` 1
    only when the run passed and every planned test passed. With no planned test the status decides
    (``passed`` → 1); ``sandbox_error`` raises (unscored). Introduced in lesson 10."""
    return shaped_reward(kind, status, passed, total)
