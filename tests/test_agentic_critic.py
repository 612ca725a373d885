"""GAE against its definition; the hindsight critic's advantages on the toy task."""
from __future__ import annotations

import numpy as np
import pytest

from course_lib.agentic.critic import advantage_quality, gae, train_actor


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
