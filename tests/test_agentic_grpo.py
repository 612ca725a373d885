"""GRPO advantages and their weighting: invariants a plausible bug would break."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.agentic.grpo import (clipped_surrogate, difficulty_weights, entropy_weights,
                                     group_advantages, mean_token_entropy, task_difficulty,
                                     weighted_advantages)


def test_group_advantages_are_normalised():
    a = group_advantages([1, 0, 0, 1, 1, 0, 0, 0])
    assert a.mean() == pytest.approx(0, abs=1e-9)
    assert a.std() == pytest.approx(1, abs=1e-4)
    assert np.allclose(group_advantages([1, 0]), [1, -1], atol=1e-5)   # population std, not ddof=1
    assert np.all(group_advantages([1, 1, 1]) == 0)


def test_difficulty_scales_hard_groups_up():
    groups = [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]       # easy, hard, all-fail (no signal)
    assert task_difficulty(groups[1]) == 0.75
    w = difficulty_weights(groups)
    assert w[1] > 1 > w[0]
    assert w[0] == pytest.approx(0.25 / 0.5) and w[1] == pytest.approx(0.75 / 0.5)


def test_entropy_scales_exploring_samples_up_within_group():
    w = entropy_weights([0.5, 1.0, 1.5])
    assert w[0] < 1 < w[2]
    adv = weighted_advantages([[1, 1, 0, 0]], [[2.0, 1.0, 1.0, 1.0]], use_difficulty=False)[0]
    assert adv[0] > adv[1] > 0 > adv[3]
    assert adv[2] == adv[3]


def test_zero_advantage_groups_stay_zero_under_every_weight():
    adv = weighted_advantages([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]],
                              [[3, 1, 1, 1], [0.1, 5, 1, 1], [1, 1, 1, 1]])
    assert np.all(adv[0] == 0) and np.all(adv[1] == 0)
    assert np.abs(adv[2]).sum() > 0


def test_entropy_and_surrogate_helpers():
    logits = torch.zeros(2, 3, 4)
    assert torch.allclose(mean_token_entropy(logits), torch.full((2,), np.log(4), dtype=torch.float32))
    ratio = torch.tensor([[1.5, 0.5]])
    adv = torch.tensor([[1.0, 1.0]])
    loss = clipped_surrogate(ratio, adv, torch.ones(1, 2), clip_eps=0.2)
    assert loss.item() == pytest.approx(-(1.2 + 0.5) / 2)
