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


def test_turn_ratio_is_the_geometric_not_the_arithmetic_mean():
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[2.0, 0.5, 1.0, 1.0]]))       # turn 0: ratios 2 and 0.5
    r = turn_ratios(new, old, torch.tensor([[0, 0, 1, 1]]), torch.ones(1, 4))
    assert torch.allclose(r[0, :2], torch.ones(2))              # geometric mean 1 (arithmetic: 1.25)


def test_turn_level_clip_binds_below_for_negative_advantages():
    """A < 0 and a turn whose ratio fell below 1 - eps: that turn is clipped (no gradient); a one-sided
    clamp(max=1+eps) would keep pushing its probability down."""
    old = torch.log(torch.full((1, 6), 0.5))
    new = old.clone()
    new[0, 2:4] = torch.log(torch.tensor(0.3))                   # turn 1: ratio 0.6 < 0.8
    lp = new.clone().requires_grad_(True)
    turns = torch.tensor([[0, 0, 1, 1, 2, 2]])
    loss = turn_level_loss(lp, old, -torch.ones(1, 6), turns, torch.ones(1, 6), clip_eps=0.2)
    (g,) = torch.autograd.grad(loss, lp)
    assert torch.all(g[0, 2:4] == 0) and torch.all(g[0, [0, 1, 4, 5]] != 0)
    assert loss.item() == pytest.approx((1 + 1 + 0.8 + 0.8 + 1 + 1) / 6, abs=1e-6)


def test_one_ratio_per_turn_not_per_token_under_noise():
    """Token noise that cancels inside a turn clips single tokens at token level, nothing at turn level."""
    old = torch.zeros(1, 8)
    new = torch.log(torch.tensor([[1.5, 1 / 1.5, 1.0, 1.0, 1.3, 1 / 1.3, 1.0, 1.0]]))
    turns = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]])
    lp = new.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(turn_level_loss(lp, old, torch.ones(1, 8), turns, torch.ones(1, 8)), lp)
    assert torch.all(g != 0)                                        # turn ratios are 1: nothing clipped
    from course_lib.agentic.grpo import clipped_surrogate
    lp2 = new.clone().requires_grad_(True)
    (g2,) = torch.autograd.grad(clipped_surrogate(torch.exp(lp2 - old), torch.ones(1, 8), torch.ones(1, 8)), lp2)
    assert (g2 == 0).nonzero()[:, 1].tolist() == [0, 4]            # token level clips tokens 0 and 4


def test_routing_replay_makes_train_and_sampler_agree():
    from course_lib.agentic.turns import moe_logprobs, moe_routes

    g = torch.Generator().manual_seed(0)
    hidden, router = torch.randn(400, 8, generator=g), torch.randn(8, 4, generator=g)
    experts, targets = torch.randn(4, 8, 16, generator=g), torch.randint(0, 16, (400,), generator=g)
    sampler_routes = moe_routes(hidden, router, noise=0.3, seed=1)
    trainer_routes = moe_routes(hidden, router, noise=0.3, seed=2)
    flipped = sampler_routes != trainer_routes
    assert 0 < flipped.float().mean() < 0.5                          # near-ties route differently
    infer = moe_logprobs(hidden, experts, sampler_routes, targets)
    recomputed = moe_logprobs(hidden, experts, trainer_routes, targets)
    replayed = moe_logprobs(hidden, experts, sampler_routes, targets)
    assert torch.equal(replayed, infer)                              # same weights, same routes: ratio exactly 1
    assert torch.all((recomputed - infer)[~flipped] == 0) and torch.all((recomputed - infer)[flipped] != 0)
