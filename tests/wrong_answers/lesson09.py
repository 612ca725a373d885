"""Plausible wrong answers to lesson 09's exercises."""
from __future__ import annotations

import numpy as np


def sample_std(rewards, eps=1e-6):              # ddof=1
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / (r.std(ddof=1) + eps)


def no_eps(rewards, eps=1e-6):                  # all-equal groups divide 0 by 0
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / r.std()


def mean_only(rewards, eps=1e-6):               # forgets to scale
    r = np.asarray(rewards, dtype=float)
    return r - r.mean()


def divides_by_max(rewards, eps=1e-6):
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / (np.abs(r - r.mean()).max() + eps)


def _pr(predicted, gold):
    pred, gold = set(predicted), set(gold)
    tp = len(pred & gold)
    return tp / len(pred), tp / len(gold)


def f1_always(predicted, gold, beta=2.0):       # ignores beta
    if not set(predicted) and not set(gold):
        return 1.0
    if not set(predicted) & set(gold):
        return 0.0
    p, r = _pr(predicted, gold)
    return 2 * p * r / (p + r)


def swapped_precision_recall(predicted, gold, beta=2.0):
    if not set(predicted) and not set(gold):
        return 1.0
    if not set(predicted) & set(gold):
        return 0.0
    r, p = _pr(predicted, gold)
    return (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


def beta_not_squared(predicted, gold, beta=2.0):
    if not set(predicted) and not set(gold):
        return 1.0
    if not set(predicted) & set(gold):
        return 0.0
    p, r = _pr(predicted, gold)
    return (1 + beta) * p * r / (beta * p + r)


def lists_not_sets(predicted, gold, beta=2.0):  # duplicates count twice
    if not predicted and not gold:
        return 1.0
    tp = sum(x in gold for x in predicted)
    if tp == 0:
        return 0.0
    p, r = tp / len(predicted), tp / len(gold)
    return (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


def empty_is_zero(predicted, gold, beta=2.0):
    if not set(predicted) & set(gold):
        return 0.0
    p, r = _pr(predicted, gold)
    return (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


WRONG_ANSWERS = {
    "09-1": [sample_std, no_eps, mean_only, divides_by_max],
    "09-2": [f1_always, swapped_precision_recall, beta_not_squared, lists_not_sets, empty_is_zero],
}
