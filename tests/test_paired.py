"""Paired confidence intervals of a pass@1 difference (course_lib.evaluation.paired), against cases computed
by hand."""
from __future__ import annotations

import numpy as np
import pytest

from course_lib.evaluation import paired


def test_mcnemar_exact_by_hand():
    # 5 prompts passed by A alone, 1 by B alone: p = 2 * P(X <= 1), X ~ Bin(6, 1/2) = 2 * (1 + 6) / 64
    assert paired.mcnemar_exact(5, 1) == pytest.approx(14 / 64)
    assert paired.mcnemar_exact(1, 5) == pytest.approx(14 / 64)
    assert paired.mcnemar_exact(0, 0) == 1.0
    assert paired.mcnemar_exact(3, 3) == 1.0                      # the tail over one half is above 1/2: capped
    assert paired.mcnemar_exact(10, 0) == pytest.approx(2 / 2 ** 10)


def test_two_prompts_bootstrap_by_hand():
    """d = (1, 0): a resample of two prompts has mean 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4, so the
    95 % percentile interval is [0, 1], the bootstrap sd sqrt(1/8) and the point estimate 0.5."""
    res = paired.paired_pass_difference([1, 1], [0, 1], seed=0)
    assert res["diff"] == 0.5 and (res["a"], res["b"]) == (1.0, 0.5)
    assert (res["low"], res["high"]) == (0.0, 1.0)
    assert res["se"] == pytest.approx(np.sqrt(1 / 8), rel=0.03)
    assert (res["a_only"], res["b_only"], res["prompts"], res["seeds"]) == (1, 0, 2, 1)
    assert not res["excludes_zero"]
    assert paired.difference_verdict(res, "A", "B").startswith("no measurable difference between A and B: A − B +0.500")


def test_standard_error_matches_the_formula_and_is_deterministic():
    """400 prompts, A alone passes 80 and B alone 40: the per-prompt differences have mean 0.1 and population
    variance (120/400) − 0.1² = 0.29, so the standard error is sqrt(0.29 / 400) ≈ 0.0269 and the 95 % interval
    about 0.1 ± 1.96 · 0.0269 (excludes 0)."""
    a = np.array([1] * 80 + [0] * 40 + [1] * 100 + [0] * 180)
    b = np.array([0] * 80 + [1] * 40 + [1] * 100 + [0] * 180)
    res = paired.paired_pass_difference(a, b, seed=3)
    se = np.sqrt(0.29 / 400)
    assert res["diff"] == pytest.approx(0.1)
    assert res["se"] == pytest.approx(se, rel=0.05)
    assert res["low"] == pytest.approx(0.1 - 1.96 * se, abs=0.006) and res["high"] == pytest.approx(0.1 + 1.96 * se, abs=0.006)
    assert res["excludes_zero"] and res["p_mcnemar"] < 0.001
    assert paired.paired_pass_difference(a, b, seed=3) == res
    assert paired.difference_verdict(res, "RL", "SFT").startswith("RL ahead of SFT: RL − SFT +0.100 (95 % paired CI +0.")
    flipped = paired.paired_pass_difference(b, a, seed=3)
    assert paired.difference_verdict(flipped, "SFT", "RL").startswith("RL ahead of SFT: SFT − RL -0.100")


def test_several_seeds_resample_seeds_and_prompts():
    """Two seeds, each with its own prompts: the difference is the mean of the seeds' differences; seeds that
    disagree widen the interval beyond the one-seed intervals' width."""
    a = [[1] * 60 + [0] * 40, [1] * 40 + [0] * 60 + [0] * 20]
    b = [[0] * 60 + [0] * 40, [1] * 40 + [0] * 60 + [0] * 20]
    res = paired.paired_pass_difference(a, b, seed=1)
    assert res["diff"] == pytest.approx((0.6 + 0.0) / 2) and res["seeds"] == 2 and res["pairs"] == 220
    one = paired.paired_pass_difference(a[0], b[0], seed=1)
    assert res["high"] - res["low"] > one["high"] - one["low"]
    assert res["low"] <= 0.05 and res["high"] >= 0.55          # a seed level with two seeds: 0 or 0.6 can come out
    assert "100 prompts × 2 seeds" in paired.format_interval(res)


def test_shapes_and_missing_outcomes_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="seed 0: a has 3 outcomes, b has 2"):
        paired.paired_pass_difference([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="missing outcome"):
        paired.paired_pass_difference([1, None], [1, 0])
    with pytest.raises(ValueError, match="a has 2 seeds, b has 1"):
        paired.paired_pass_difference([[1], [0]], [[1]])
