"""Turn-level ratios clip per turn; MCLA shrinks ratio noise about like 1/sqrt(K)."""
from __future__ import annotations

import pytest
import torch

from course_lib.agentic.turns import (
    icepop_mask,
    mcla_logprobs,
    ratio_noise_by_k,
    sequence_ratios,
    token_logprobs,
    turn_level_loss,
    turn_ratios,
)
from tests._agentic_helpers import tiny_qwen2


def _traj():
    old = torch.log(torch.full((1, 6), 0.5))
    new = old.clone()
    new[0, 4:] = torch.log(torch.tensor(0.9))          # only turn 2 drifted (ratio 1.8)
    turns = torch.tensor([[0, 0, 1, 1, 2, 2]])
    mask = torch.ones(1, 6)
    return new, old, turns, mask


def test_turn_ratio_is_geometric_mean_of_its_turn():
    new, old, turns, mask = _traj()
    r = turn_ratios(new, old, turns, mask)
    assert torch.allclose(r[0, :4], torch.ones(4))
    assert torch.allclose(r[0, 4:], torch.full((2,), 1.8))
    seq = sequence_ratios(new, old, mask)
    assert torch.allclose(seq, torch.full((1, 6), 1.8 ** (1 / 3)))


def test_clipping_acts_on_the_drifted_turn_only():
    new, old, turns, mask = _traj()
    new = new.clone().requires_grad_(True)
    loss = turn_level_loss(new, old, torch.ones(1, 6), turns, mask, clip_eps=0.2)
    (g,) = torch.autograd.grad(loss, new)
    assert torch.all(g[0, :4] != 0)          # turns 0 and 1 still learn
    assert torch.all(g[0, 4:] == 0)          # turn 2 is clipped (ratio 1.8 > 1.2, A > 0)
    # with one ratio per trajectory (1.8^(1/3) = 1.22 > 1.2) the whole trajectory would be clipped
    seq = sequence_ratios(new.detach(), old, mask)
    assert (seq > 1.2).all()


def test_mcla_variance_falls_with_k_on_synthetic_noise():
    torch.manual_seed(0)
    true = torch.log(torch.full((200,), 0.3))
    score = lambda: true + 0.2 * torch.randn(200)
    noise = ratio_noise_by_k(score, ks=(1, 8), trials=30)
    assert noise[8] < noise[1] / 2                          # ideal: / sqrt(8) = / 2.83
    assert noise[1] == pytest.approx(0.2 * 2 ** 0.5, rel=0.1)
    with pytest.raises(ValueError):
        mcla_logprobs(score, 0)


def test_mcla_on_a_model_with_dropout_noise():
    torch.manual_seed(0)
    model = tiny_qwen2("eager", attention_dropout=0.3, initializer_range=0.1)
    model.train()
    ids = torch.randint(0, 64, (2, 24))
    noise = ratio_noise_by_k(lambda: token_logprobs(model, ids), ks=(1, 8), trials=8)
    assert noise[1] > 0 and noise[8] < noise[1] * 0.6


def test_turn_ratio_ignores_masked_tokens():
    new, old, turns, mask = _traj()
    new = new.clone()
    new[0, 1] = old[0, 1] + 3.0                # a masked token (a tool output) with a wild log-ratio
    mask = mask.clone()
    mask[0, 1] = 0
    r = turn_ratios(new, old, turns, mask)
    assert torch.allclose(r[0, [0, 2, 3]], torch.ones(3)) and r[0, 1] == 1.0
    assert torch.allclose(sequence_ratios(new, old, mask)[0, 0], torch.tensor(1.8 ** (2 / 5)))


def test_one_drifted_turn_hides_in_a_long_trajectory_ratio():
    turns_n, per_turn = 60, 5
    old = torch.log(torch.full((1, turns_n * per_turn), 0.5))
    new = old.clone()
    new[0, 30 * per_turn:31 * per_turn] = torch.log(torch.tensor(1.0))   # turn 30: ratio 2
    turns = torch.arange(turns_n).repeat_interleave(per_turn)[None]
    mask = torch.ones_like(old)
    assert 1.0 < sequence_ratios(new, old, mask)[0, 0] < 1.2                # 2^(1/60): inside the clip range
    lp = new.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(turn_level_loss(lp, old, torch.ones_like(old), turns, mask, 0.2), lp)
    clipped = (g[0] == 0).nonzero().flatten().tolist()
    assert clipped == list(range(30 * per_turn, 31 * per_turn))


def test_icepop_drops_tokens_with_a_train_infer_mismatch():
    infer = torch.log(torch.tensor([[0.5, 0.5, 0.5, 0.5]]))
    train = torch.log(torch.tensor([[0.5, 0.9, 0.2, 0.5]]))           # ratios 1, 1.8, 0.4, 1
    m = icepop_mask(train, infer, torch.tensor([[1.0, 1.0, 1.0, 0.0]]), low=0.5, high=2.0)
    assert m.tolist() == [[1.0, 1.0, 0.0, 0.0]]
    with pytest.raises(ValueError):
        icepop_mask(train, infer, torch.ones(1, 4), low=1.5, high=2.0)
