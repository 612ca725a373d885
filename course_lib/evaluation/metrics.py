"""Metrics of lesson 06: the unbiased pass@k estimator and friends.

pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): draw ``n >= k`` samples
per problem, count the ``c`` that pass, and estimate the chance that at least one of ``k`` samples
passes as ``1 - C(n-c, k) / C(n, k)``. The product form below never builds the huge binomials.

Introduced in lesson 06.
"""
from __future__ import annotations

from fractions import Fraction
from math import comb
from typing import Iterable

import numpy as np


def _check_counts(n: int, c: int, k: int) -> None:
    for name, v in (("n", n), ("c", c), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"pass@k needs integer counts; {name}={v!r}")
    if n < 1 or k < 1:
        raise ValueError(f"pass@k needs n >= 1 and k >= 1 (got n={n}, k={k})")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n: the number of correct samples c={c} with n={n} samples")
    if k > n:
        raise ValueError(f"pass@{k} needs at least k samples per problem, got n={n}: sample more or lower k")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with ``n`` samples of which ``c`` passed.

    ``1 - C(n-c, k)/C(n, k)`` computed stably as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``; 1.0 when
    ``n - c < k`` (every k-subset holds a correct sample). Introduced in lesson 06.
    """
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def pass_at_k_exact(n: int, c: int, k: int) -> Fraction:
    """pass@k as an exact fraction from integer binomials (slow for big n; the reference in tests).
    Introduced in lesson 06."""
    _check_counts(n, c, k)
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """pass@k of a benchmark: the mean over problems of :func:`pass_at_k`; ``counts`` holds one
    ``(n, c)`` pair per problem. Introduced in lesson 06."""
    values = [pass_at_k(int(n), int(c), k) for n, c in counts]
    if not values:
        raise ValueError("mean_pass_at_k needs at least one problem")
    return float(np.mean(values))


def pass_counts(results_per_problem: Iterable[Iterable]) -> list[tuple[int, int]]:
    """``(n, c)`` per problem from sandbox results grouped by problem (``.passed`` is counted).
    Introduced in lesson 06.
    Public: documented in docs/sandbox.md, for students to call."""
    return [(len(rs), sum(bool(r.passed) for r in rs)) for rs in (list(g) for g in results_per_problem)]
