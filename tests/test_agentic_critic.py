"""GAE against its definition; the hindsight critic's advantages on the toy task."""
from __future__ import annotations

import numpy as np
import pytest

from course_lib.agentic.critic import (
    TabularCritic,
    ToyTask,
    advantage_quality,
    clipped_ppo_step,
    gae,
    initial_theta,
    paired_difference,
    ppo_experiment,
    sample_episodes,
    train_actor,
    train_ppo,
)


def _gae_by_definition(r, v, gamma, lam):
    T = len(r)
    v_next = np.r_[v[1:], 0.0]
    delta = r + gamma * v_next - v
    return np.array([sum((gamma * lam) ** (k - t) * delta[k] for k in range(t, T)) for t in range(T)])


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.5), (0.99, 0.0), (0.9, 1.0)])
def test_gae_matches_definition(gamma, lam):
    rng = np.random.default_rng(1)
    r, v = rng.normal(size=7), rng.normal(size=7)
    adv, ret = gae(r, v, gamma, lam)
    assert np.allclose(adv, _gae_by_definition(r, v, gamma, lam))
    assert np.allclose(ret, adv + v)


def test_gae_limits_and_batches():
    r = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    v = np.array([[0.2, 0.4, 0.5], [0.1, 0.3, 0.0]])
    adv, _ = gae(r, v, 1.0, 1.0)                       # lambda = 1: Monte-Carlo return - V
    assert np.allclose(adv, np.cumsum(r[:, ::-1], 1)[:, ::-1] - v)
    adv0, _ = gae(r, v, 1.0, 0.0)                      # lambda = 0: one-step TD error
    assert np.allclose(adv0, r + np.c_[v[:, 1:], np.zeros(2)] - v)
    with pytest.raises(ValueError):
        gae(r, v[:, :2])


def test_hindsight_critic_lower_variance_better_placed_unbiased():
    q = advantage_quality(n_fit=20_000, n_eval=4_000, seed=0)
    hist, hind, leak = q["history"], q["hindsight"], q["outcome"]
    assert all(h < s for h, s in zip(hind["adv_std"], hist["adv_std"]))    # lower variance at every step
    assert hist["edit_adv_wrong_file"] < -0.05                           # history blames the edits ...
    assert abs(hind["edit_adv_wrong_file"]) < 0.01                       # ... hindsight blames the file
    assert hind["a0_right_file"] > 0 > hind["a0_wrong_file"]
    # same expected policy gradient (unbiased baseline), within sampling error
    assert np.allclose(hind["grad_mean"], hist["grad_mean"], atol=0.01)
    # leaking the outcome into the critic kills the signal
    assert max(leak["adv_std"]) == 0.0


def test_actor_learns_with_hindsight_but_not_with_leaked_outcome():
    hind = np.mean([train_actor(kind="hindsight", seed=s, iterations=60) for s in range(4)], 0)
    leak = np.mean([train_actor(kind="outcome", seed=s, iterations=60) for s in range(4)], 0)
    assert hind[-10:].mean() > hind[:5].mean() + 0.1
    assert hind[-10:].mean() > leak[-10:].mean() + 0.1


def _ppo_objective_by_definition(th, old, ep, adv, eps=0.2):
    a = np.concatenate([ep.follow_hint[:, None], ep.good_edit], 1).astype(float)
    p_n, p_o = 1 / (1 + np.exp(-th)), 1 / (1 + np.exp(-old))
    rho = np.where(a == 1, p_n, 1 - p_n) / np.where(a == 1, p_o, 1 - p_o)
    return np.minimum(rho * adv, np.clip(rho, 1 - eps, 1 + eps) * adv).mean(0).sum(), rho


@pytest.mark.parametrize("shift", [0.05, 0.6, -0.6])
def test_clipped_ppo_gradient_matches_finite_differences_on_both_sides_of_the_clip(shift):
    """Random-sign advantages; at shift ±0.6 some terms have rho < 1 - eps with A < 0 (the lower side
    binds) and some rho > 1 + eps with A > 0: a one-sided clip gets the gradient wrong there."""
    task = ToyTask()
    rng = np.random.default_rng(0)
    old = initial_theta(task)
    ep = sample_episodes(task, old, 256, rng)
    adv = rng.normal(size=(256, task.steps))
    theta = old + shift
    _, rho = _ppo_objective_by_definition(theta, old, ep, adv)
    if shift != 0.05:
        assert np.any((rho < 0.8) & (adv < 0)) and np.any((rho > 1.2) & (adv > 0))
    grad, share = clipped_ppo_step(theta, old, ep, adv)
    num = np.array([(_ppo_objective_by_definition(theta + h, old, ep, adv)[0]
                     - _ppo_objective_by_definition(theta - h, old, ep, adv)[0]) / 2e-6
                    for h in np.eye(task.steps) * 1e-6])
    assert np.allclose(grad, num, atol=1e-5)
    expected_share = np.mean(((rho < 0.8) & (adv < 0)) | ((rho > 1.2) & (adv > 0)))
    assert share == pytest.approx(expected_share)


def test_clipped_ppo_stops_negative_advantages_below_the_clip():
    task = ToyTask()
    ep = sample_episodes(task, initial_theta(task), 256, np.random.default_rng(1))
    old = initial_theta(task)
    grad, share = clipped_ppo_step(old - 5.0, old, ep, -np.ones((256, task.steps)))
    taken = np.concatenate([ep.follow_hint[:, None], ep.good_edit], 1)
    # actions taken (a = 1) now have rho = sigmoid(-5 + theta0)/sigmoid(theta0) << 0.8 with A < 0: all clipped;
    # the untaken ones (rho > 1.2, A < 0) are not: their gradient is what is left
    assert share == pytest.approx(taken.mean())
    far, share_pos = clipped_ppo_step(old + 5.0, old, ep, np.ones((256, task.steps)))
    assert share_pos == pytest.approx(taken.mean()) and np.all(np.isfinite(far))


def test_the_critic_regresses_the_gae_returns():
    """Two iterations of train_ppo against the notes' recipe written out: sample, GAE from the critic,
    normalised advantages, clipped PPO epochs, critic.fit(A + V). Monte-Carlo targets, the raw advantages
    as targets, or a critic never fitted give another table."""
    task, lam, batch, lr, clr = ToyTask(edit_steps=3), 0.5, 256, 2.0, 0.5
    run = train_ppo(task, "history", iterations=2, batch=batch, lr=lr, critic_lr=clr, lam=lam, seed=3)
    rng = np.random.default_rng(3)
    theta, critic, mc = initial_theta(task), TabularCritic("history", lr=clr), TabularCritic("history", lr=clr)
    for _ in range(2):
        ep = sample_episodes(task, theta, batch, rng)
        adv, returns = gae(ep.rewards, critic(ep), 1.0, lam)
        assert not np.allclose(returns, np.cumsum(ep.rewards[:, ::-1], 1)[:, ::-1])    # the targets differ
        norm = (adv - adv.mean()) / (adv.std() + 1e-8)
        old = theta.copy()
        for _ in range(4):
            theta = theta + lr * clipped_ppo_step(theta, old, ep, norm)[0]
        critic.fit(ep, returns)
        mc.fit(ep, np.cumsum(ep.rewards[:, ::-1], 1)[:, ::-1])
    assert run["critic"].value.keys() == critic.value.keys()
    assert all(run["critic"].value[k] == pytest.approx(v) for k, v in critic.value.items())
    assert any(abs(mc.value[k] - v) > 1e-3 for k, v in critic.value.items())      # MC would be caught


def test_normalised_advantages_make_the_clip_bind():
    """Standard PPO (per-batch normalised advantages) with a large step: the clip binds on a real share
    of the terms in the first iterations; with raw advantages the same step hardly moves the ratio."""
    norm = train_ppo(ToyTask(edit_steps=10), "history", iterations=5, lr=10.0, seed=0)
    raw = train_ppo(ToyTask(edit_steps=10), "history", iterations=5, lr=10.0, seed=0, normalize=False)
    assert norm["clipped"].mean() > 0.05 and raw["clipped"].mean() < norm["clipped"].mean() / 2


def test_paired_difference_and_its_verdict():
    a, b = np.array([0.5, 0.6, 0.55, 0.52]), np.array([0.4, 0.5, 0.45, 0.44])
    d = paired_difference(a, b)
    assert d["mean"] == pytest.approx(0.095) and d["wins"] == 4 and d["verdict"] == "a higher"
    assert paired_difference(b, a)["verdict"] == "b higher"
    noisy = paired_difference(np.array([0.5, 0.4, 0.6]), np.array([0.45, 0.5, 0.5]))
    assert noisy["verdict"] == "no measurable difference" and noisy["ci95"][0] < 0 < noisy["ci95"][1]
    # the t quantile, not the normal's: 3 seeds with differences 1, 2, 3 -> 2 +- 4.303 * 1 / sqrt(3)
    assert paired_difference(np.array([1.0, 2, 3]), np.zeros(3))["ci95"][0] == pytest.approx(2 - 4.303 / np.sqrt(3))
    with pytest.raises(ValueError):
        paired_difference(np.ones(3), np.ones(4))


def test_asymmetric_ppo_learns_and_the_critic_regresses_gae_returns():
    run = train_ppo(ToyTask(edit_steps=6), "hindsight", iterations=40, seed=0)
    assert run["success"][-10:].mean() > run["success"][:5].mean() + 0.1
    res = ppo_experiment(ToyTask(edit_steps=6), ("history", "hindsight"), seeds=3, iterations=20)
    assert res["hindsight"]["final"].shape == (3,) and res["hindsight"]["final_std"] >= 0
    with pytest.raises(ValueError, match="two seeds"):
        ppo_experiment(seeds=1)
