"""GAE against its definition; the hindsight critic's advantages on the toy task."""
from __future__ import annotations

import numpy as np
import pytest

from course_lib.agentic.critic import (
    ToyTask,
    advantage_quality,
    clipped_ppo_step,
    gae,
    initial_theta,
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


def test_clipped_ppo_gradient_matches_finite_differences_and_stops_outside_the_clip():
    task = ToyTask()
    rng = np.random.default_rng(0)
    old = initial_theta(task)
    ep = sample_episodes(task, old, 256, rng)
    adv = rng.normal(size=(256, task.steps))
    theta = old + 0.05

    def objective(th):
        a = np.concatenate([ep.follow_hint[:, None], ep.good_edit], 1).astype(float)
        p_n, p_o = 1 / (1 + np.exp(-th)), 1 / (1 + np.exp(-old))
        rho = np.where(a == 1, p_n, 1 - p_n) / np.where(a == 1, p_o, 1 - p_o)
        return np.minimum(rho * adv, np.clip(rho, 0.8, 1.2) * adv).mean(0).sum()

    grad, share = clipped_ppo_step(theta, old, ep, adv)
    num = np.array([(objective(theta + h) - objective(theta - h)) / 2e-6 for h in np.eye(task.steps) * 1e-6])
    assert np.allclose(grad, num, atol=1e-5) and share == 0.0
    far, share = clipped_ppo_step(old + 5.0, old, ep, np.ones((256, task.steps)))
    assert share > 0.4 and np.all(np.isfinite(far))         # ratios above 1 + eps with A > 0: clipped


def test_asymmetric_ppo_learns_and_the_critic_regresses_gae_returns():
    run = train_ppo(ToyTask(edit_steps=6), "hindsight", iterations=40, seed=0)
    assert run["success"][-10:].mean() > run["success"][:5].mean() + 0.1
    res = ppo_experiment(ToyTask(edit_steps=6), ("history", "hindsight"), seeds=3, iterations=20)
    assert res["hindsight"]["final"].shape == (3,) and res["hindsight"]["final_std"] >= 0
    with pytest.raises(ValueError, match="two seeds"):
        ppo_experiment(seeds=1)
