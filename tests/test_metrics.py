"""pass@k: the stable estimator agrees with exact combinatorics and behaves at the edges."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from course_lib.evaluation.metrics import mean_pass_at_k, pass_at_k, pass_at_k_exact, pass_counts
from course_lib.evaluation.sandbox import SandboxResult


def test_matches_exact_combinatorics_on_a_grid():
    for n in range(1, 16):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(float(pass_at_k_exact(n, c, k)), abs=1e-12)


def test_matches_the_definition_by_enumeration():
    # pass@k = share of k-subsets of the n samples that contain at least one correct sample
    n, c = 7, 3
    samples = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(samples, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_stable_for_large_n():
    # the binomials have hundreds of digits; the product form stays finite and exact enough
    value = pass_at_k(2000, 13, 100)
    assert 0 < value < 1
    assert value == pytest.approx(float(pass_at_k_exact(2000, 13, 100)), rel=1e-9)
    with pytest.raises(OverflowError):
        float(math.comb(2000, 1000))


def test_edge_cases():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 6, 5) == 1.0            # n - c < k: every 5-subset has a correct one
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the plain pass rate
    assert pass_at_k(5, 2, 5) == 1.0


@pytest.mark.parametrize("n, c, k, err", [(0, 0, 1, ValueError), (5, 6, 1, ValueError), (5, -1, 1, ValueError),
                                          (5, 2, 0, ValueError), (5, 2, 6, ValueError), (5.0, 2, 1, TypeError)])
def test_bad_counts_are_refused(n, c, k, err):
    with pytest.raises(err):
        pass_at_k(n, c, k)


def test_monotone_in_k_and_c():
    rng = random.Random(0)
    for _ in range(100):
        n = rng.randint(2, 50)
        c = rng.randint(0, n)
        values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
        assert values == sorted(values)
        if c < n:
            assert pass_at_k(n, c + 1, 1) >= pass_at_k(n, c, 1)


def test_unbiased_against_simulation():
    # the estimator's mean over many draws of n samples equals the true pass@k of the problem
    rng = random.Random(1)
    p, n, k = 0.2, 20, 5
    truth = 1 - (1 - p) ** k
    estimates = [pass_at_k(n, sum(rng.random() < p for _ in range(n)), k) for _ in range(4000)]
    assert sum(estimates) / len(estimates) == pytest.approx(truth, abs=0.01)


def test_mean_and_counts():
    assert mean_pass_at_k([(10, 10), (10, 0)], 1) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mean_pass_at_k([], 1)
    groups = [[SandboxResult("passed"), SandboxResult("failed")], [SandboxResult("timeout")]]
    assert pass_counts(groups) == [(2, 1), (1, 0)]
