"""Plausible wrong answers to lesson 10's exercises."""
from __future__ import annotations

import numpy as np


def population_std(rewards, group_size):             # ddof=0: lesson 09's formula, not TRL's
    g = np.asarray(rewards, dtype=float).reshape(-1, group_size)
    return ((g - g.mean(1, keepdims=True)) / (g.std(1, keepdims=True) + 1e-4)).reshape(-1).tolist()


def batch_baseline(rewards, group_size):             # one mean and std over the whole batch
    r = np.asarray(rewards, dtype=float)
    return ((r - r.mean()) / (r.std(ddof=1) + 1e-4)).tolist()


def strided_groups(rewards, group_size):             # group i takes every n_groups-th rollout
    r = np.asarray(rewards, dtype=float)
    g = r.reshape(group_size, -1).T
    a = (g - g.mean(1, keepdims=True)) / (g.std(1, ddof=1, keepdims=True) + 1e-4)
    return a.T.reshape(-1).tolist()


def mean_only(rewards, group_size):                  # Dr. GRPO's scale_rewards="none", not asked here
    g = np.asarray(rewards, dtype=float).reshape(-1, group_size)
    return (g - g.mean(1, keepdims=True)).reshape(-1).tolist()


def objective_not_loss(ratios, advantages, eps_low=0.2, eps_high=0.28):     # forgets the minus sign
    r, a = np.asarray(ratios, float), np.asarray(advantages, float)
    return np.minimum(r * a, np.clip(r, 1 - eps_low, 1 + eps_high) * a).tolist()


def symmetric_clip(ratios, advantages, eps_low=0.2, eps_high=0.28):         # eps_low on both sides
    r, a = np.asarray(ratios, float), np.asarray(advantages, float)
    return (-np.minimum(r * a, np.clip(r, 1 - eps_low, 1 + eps_low) * a)).tolist()


def upper_side_only(ratios, advantages, eps_low=0.2, eps_high=0.28):
    r, a = np.asarray(ratios, float), np.asarray(advantages, float)
    return (-np.minimum(r * a, np.minimum(r, 1 + eps_high) * a)).tolist()


def max_not_min(ratios, advantages, eps_low=0.2, eps_high=0.28):            # optimistic
    r, a = np.asarray(ratios, float), np.asarray(advantages, float)
    return (-np.maximum(r * a, np.clip(r, 1 - eps_low, 1 + eps_high) * a)).tolist()


def sides_swapped(ratios, advantages, eps_low=0.2, eps_high=0.28):
    r, a = np.asarray(ratios, float), np.asarray(advantages, float)
    return (-np.minimum(r * a, np.clip(r, 1 - eps_high, 1 + eps_low) * a)).tolist()


def fraction_everywhere(kind, status, passed, total):                        # ignores the kind
    return passed / total


def penalties_swapped(kind, status, passed, total):
    if kind == "pass":
        return float(passed == total and status == "passed")
    if status in ("syntax_error", "no_code"):
        return -0.5 if kind == "lecture" else 0.0
    if status in ("runtime_error", "timeout"):
        return -1.0 if kind == "lecture" else 0.0
    return passed / total


def timeout_not_penalised(kind, status, passed, total):                      # a hang costs nothing
    if kind == "pass":
        return float(passed == total and status == "passed")
    if status in ("syntax_error", "no_code"):
        return -1.0 if kind == "lecture" else 0.0
    if status == "runtime_error":
        return -0.5 if kind == "lecture" else 0.0
    return passed / total


def fraction_keeps_penalties(kind, status, passed, total):                   # fraction == lecture
    if kind == "pass":
        return float(passed == total and status == "passed")
    if status in ("syntax_error", "no_code"):
        return -1.0
    if status in ("runtime_error", "timeout"):
        return -0.5
    return passed / total


def limits_not_penalised(kind, status, passed, total):                       # issue 34: lists six statuses only
    if kind == "pass":
        return 1.0 if status == "passed" and passed == total else 0.0
    if status in ("syntax_error", "no_code"):
        return -1.0 if kind == "lecture" else 0.0
    if status in ("runtime_error", "timeout"):
        return -0.5 if kind == "lecture" else 0.0
    return passed / total if total else 0.0


def zero_tests_divide(kind, status, passed, total):                          # issue 34: a task with no test
    if kind == "pass":
        return 1.0 if status == "passed" and passed == total else 0.0
    if status in ("syntax_error", "no_code"):
        return -1.0 if kind == "lecture" else 0.0
    if status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5 if kind == "lecture" else 0.0
    return passed / total


def pass_ignores_status(kind, status, passed, total):                        # issue 34: counts only
    if kind == "pass":
        return 1.0 if passed == total else 0.0
    if status in ("syntax_error", "no_code"):
        return -1.0 if kind == "lecture" else 0.0
    if status in ("runtime_error", "timeout", "memory_limit", "output_limit"):
        return -0.5 if kind == "lecture" else 0.0
    return passed / total if total else float(status == "passed")


def table_form(kind, status, passed, total):                                 # right: another form
    penalty = {"syntax_error": -1.0, "no_code": -1.0, "runtime_error": -0.5, "timeout": -0.5,
               "memory_limit": -0.5, "output_limit": -0.5}
    share = passed / total if total else float(status == "passed")
    if kind == "pass":
        return float(status == "passed" and passed == total)
    if status in penalty:
        return penalty[status] if kind == "lecture" else 0.0
    return share


RIGHT_ANSWERS = {"10-1": [table_form]}


WRONG_ANSWERS = {
    "10-2": [population_std, batch_baseline, strided_groups, mean_only],
    "10-3": [objective_not_loss, symmetric_clip, upper_side_only, max_not_min, sides_swapped],
    "10-1": [fraction_everywhere, penalties_swapped, timeout_not_penalised, fraction_keeps_penalties,
             limits_not_penalised, zero_tests_divide, pass_ignores_status],
}
