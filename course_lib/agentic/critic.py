"""Asymmetric PPO with a hindsight critic (KAT-Coder-V2.5), on a toy "locate, then edit" task.

The actor may only see what the agent saw (the history). The critic is used only during training,
so it may also read *hindsight*: information the environment knows but the agent does not — where
the gold patch is, which tests the task has and how hard they are. As long as that information does
not depend on the agent's own later actions, using it in the baseline keeps the policy gradient
unbiased, removes the noise that comes from the environment, and places the advantage on the step
that decided the outcome. (Feeding the critic the *outcome itself* is the pitfall: the advantages
then collapse to zero — the experiment shows that too.)

GAE: ``delta_t = r_t + gamma V(s_{t+1}) - V(s_t)``, ``A_t = delta_t + gamma lambda A_{t+1}``.

Toy task: the agent first *locates* a file (follow the issue's hint, which is right with probability
``hint_accuracy``, or pick a file at random), then makes ``edit_steps`` edits (good or sloppy).
Reward 1 at the end when the file was right, every edit good, and the (hidden) tests pass: easy bugs
pass with ``p_easy``, hard ones with ``p_hard``.

Introduced in lesson 09.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CRITICS = ("history", "hindsight", "outcome")


def gae(rewards: np.ndarray, values: np.ndarray, gamma: float = 1.0, lam: float = 0.95,
        last_value: float | np.ndarray = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over the last axis (time). ``values[..., t] = V(s_t)``;
    ``last_value`` is V of the state after the last step (0 when the episode ended). Returns
    (advantages, returns = advantages + values). Introduced in lesson 09."""
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if rewards.shape != values.shape:
        raise ValueError(f"rewards {rewards.shape} and values {values.shape} must have the same shape")
    adv = np.zeros_like(rewards)
    next_value = np.broadcast_to(np.asarray(last_value, dtype=np.float64), rewards.shape[:-1])
    running = np.zeros(rewards.shape[:-1])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        delta = rewards[..., t] + gamma * next_value - values[..., t]
        running = delta + gamma * lam * running
        adv[..., t] = running
        next_value = values[..., t]
    return adv, adv + values


@dataclass
class ToyTask:
    """The "locate, then edit" task. Introduced in lesson 09."""

    num_files: int = 5
    hint_accuracy: float = 0.6
    edit_steps: int = 3
    p_easy: float = 0.95
    p_hard: float = 0.35
    p_hard_bug: float = 0.5

    @property
    def steps(self) -> int:
        return 1 + self.edit_steps


@dataclass
class Episodes:
    """A batch of episodes: actions, hidden facts, and the reward at the last step."""

    follow_hint: np.ndarray      # (N,) bool — the locate action
    good_edit: np.ndarray        # (N, E) bool — the edit actions
    hint_correct: np.ndarray     # (N,) bool — hidden
    located_correct: np.ndarray  # (N,) bool — hidden from the actor
    hard_bug: np.ndarray         # (N,) bool — hidden
    tests_pass: np.ndarray       # (N,) bool — hidden: would the tests pass after a correct fix?
    success: np.ndarray          # (N,) bool
    rewards: np.ndarray = field(repr=False, default=None)  # (N, T)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def initial_theta(task: ToyTask, edit_logit: float = 1.0) -> np.ndarray:
    """The starting policy: a coin flip at the locate step, edits good with p = sigmoid(edit_logit)."""
    return np.r_[0.0, np.full(task.edit_steps, edit_logit)]


def sample_episodes(task: ToyTask, theta: np.ndarray, n: int, rng: np.random.Generator) -> Episodes:
    """Roll out ``n`` episodes of the policy with logits ``theta`` (theta[0]: follow the hint,
    theta[1+e]: good edit at step e). Introduced in lesson 09."""
    p = sigmoid(theta)
    follow = rng.random(n) < p[0]
    good = rng.random((n, task.edit_steps)) < p[1:]
    hint_ok = rng.random(n) < task.hint_accuracy
    random_ok = rng.random(n) < 1.0 / task.num_files
    located = np.where(follow, hint_ok, random_ok)
    hard = rng.random(n) < task.p_hard_bug
    tests_pass = rng.random(n) < np.where(hard, task.p_hard, task.p_easy)
    success = located & good.all(1) & tests_pass
    rewards = np.zeros((n, task.steps))
    rewards[:, -1] = success
    return Episodes(follow, good, hint_ok, located, hard, tests_pass, success, rewards)


def critic_keys(ep: Episodes, kind: str) -> np.ndarray:
    """Integer feature keys (N, T) of the states s_0..s_{T-1} as the critic ``kind`` sees them:
    ``history`` (step, followed hint, good edits so far — the plain critic), ``hindsight`` (+ the patch
    difference: whether the hint / the located file is the gold file, and the test distribution:
    whether the task's tests pass after a correct fix — facts of the environment, not of the agent's
    later actions), ``outcome`` (+ the final success and the later turns: how many good edits are
    still to come).
    Introduced in lesson 09."""
    if kind not in CRITICS:
        raise ValueError(f"unknown critic {kind!r}; choose from {CRITICS}")
    n, e = ep.good_edit.shape
    t = np.arange(1 + e)[None].repeat(n, 0)
    goods = np.concatenate([np.zeros((n, 2)), np.cumsum(ep.good_edit, 1)[:, :-1]], 1).astype(int)
    followed = np.where(t == 0, 2, ep.follow_hint[:, None].astype(int))
    key = t * 1000 + followed * 100 + goods
    if kind == "hindsight":
        file_ok = np.where(t == 0, ep.hint_correct[:, None], ep.located_correct[:, None]).astype(int)
        key = key + 10_000 * file_ok + 20_000 * ep.tests_pass[:, None].astype(int)
    elif kind == "outcome":
        file_ok = np.where(t == 0, ep.hint_correct[:, None], ep.located_correct[:, None]).astype(int)
        later_good = ep.good_edit.sum(1)[:, None] - goods           # good edits still to come
        key = (key + 10_000 * file_ok + 20_000 * ep.tests_pass[:, None].astype(int)
               + 40_000 * ep.success[:, None].astype(int) + 100_000 * later_good)
    return key.astype(np.int64)


class TabularCritic:
    """V(key) as a running average of observed returns (lr=None: exact mean). Introduced in lesson 09."""

    def __init__(self, kind: str, lr: float | None = None, init: float = 0.0):
        self.kind, self.lr, self.init = kind, lr, init
        self.value: dict[int, float] = {}
        self.count: dict[int, int] = {}

    def __call__(self, ep: Episodes) -> np.ndarray:
        keys = critic_keys(ep, self.kind)
        return np.vectorize(lambda k: self.value.get(int(k), self.init), otypes=[float])(keys)

    def fit(self, ep: Episodes, returns: np.ndarray) -> None:
        keys = critic_keys(ep, self.kind)
        for k, g in zip(keys.ravel().tolist(), returns.ravel().tolist()):
            c = self.count.get(k, 0) + 1
            self.count[k] = c
            v = self.value.get(k, self.init)
            step = (1.0 / c) if self.lr is None else self.lr
            self.value[k] = v + step * (g - v)


def advantages_for(task: ToyTask, critic: TabularCritic, ep: Episodes, gamma: float = 1.0,
                   lam: float = 0.95) -> np.ndarray:
    """GAE advantages (N, T) of a batch under ``critic``. Introduced in lesson 09."""
    adv, _ = gae(ep.rewards, critic(ep), gamma, lam)
    return adv


def score_grads(task: ToyTask, theta: np.ndarray, ep: Episodes) -> np.ndarray:
    """d log pi(a_t) / d theta_t for each step: (N, T). Introduced in lesson 09."""
    p = sigmoid(theta)
    actions = np.concatenate([ep.follow_hint[:, None], ep.good_edit], 1).astype(float)
    return actions - p[None]


def advantage_quality(task: ToyTask | None = None, *, n_fit: int = 20_000, n_eval: int = 4_000,
                      lam: float = 0.95, seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """Experiment 1: fit each critic on ``n_fit`` episodes of the initial policy (p = 0.5 everywhere),
    then on fresh episodes report per step: the std of A_t, the mean and std of the per-episode
    policy-gradient term ``A_t * dlogpi/dtheta_t``, and the mean A_0 when the located file was right vs
    wrong. Introduced in lesson 09."""
    task = task or ToyTask()
    rng = np.random.default_rng(seed)
    theta = initial_theta(task)
    fit_ep = sample_episodes(task, theta, n_fit, rng)
    eval_ep = sample_episodes(task, theta, n_eval, rng)
    sg = score_grads(task, theta, eval_ep)
    out = {}
    for kind in CRITICS:
        critic = TabularCritic(kind)
        critic.fit(fit_ep, np.cumsum(fit_ep.rewards[:, ::-1], 1)[:, ::-1])
        adv = advantages_for(task, critic, eval_ep, lam=lam)
        grad = adv * sg
        out[kind] = {
            "adv_std": adv.std(0).tolist(),
            "grad_mean": grad.mean(0).tolist(),
            "grad_std": grad.std(0).tolist(),
            "a0_right_file": float(adv[eval_ep.located_correct, 0].mean()),
            "a0_wrong_file": float(adv[~eval_ep.located_correct, 0].mean()),
            # credit placement: how much the edit steps are blamed when the *file* was wrong
            "edit_adv_wrong_file": float(adv[~eval_ep.located_correct, 1:].mean()),
        }
    return out


def train_actor(task: ToyTask | None = None, kind: str = "hindsight", *, iterations: int = 60,
                batch: int = 32, lr: float = 1.0, critic_lr: float = 0.1, lam: float = 0.95,
                seed: int = 0) -> np.ndarray:
    """Experiment 2: policy-gradient training of the tabular actor with advantages from the critic
    ``kind`` (updated online). Returns the success rate of each iteration's batch.
    Introduced in lesson 09.
    Public: documented in docs/agentic.md, for students to call."""
    task = task or ToyTask()
    rng = np.random.default_rng(seed)
    theta = initial_theta(task)
    critic = TabularCritic(kind, lr=critic_lr, init=0.0)
    curve = []
    for _ in range(iterations):
        ep = sample_episodes(task, theta, batch, rng)
        adv = advantages_for(task, critic, ep, lam=lam)
        theta = theta + lr * (adv * score_grads(task, theta, ep)).mean(0)
        critic.fit(ep, np.cumsum(ep.rewards[:, ::-1], 1)[:, ::-1])
        curve.append(float(ep.success.mean()))
    return np.array(curve)


def clipped_ppo_step(theta: np.ndarray, theta_old: np.ndarray, ep: Episodes, adv: np.ndarray,
                     clip_eps: float = 0.2) -> tuple[np.ndarray, float]:
    """Gradient (per logit) of the standard clipped PPO objective
    ``mean_n min(rho A, clip(rho, 1-eps, 1+eps) A)`` summed over steps, for the tabular Bernoulli
    actor, and the share of (episode, step) terms that were clipped. ``rho`` is the ratio of the
    action's probability under ``theta`` and ``theta_old``. Introduced in lesson 09."""
    actions = np.concatenate([ep.follow_hint[:, None], ep.good_edit], 1).astype(float)
    p_new, p_old = sigmoid(theta)[None], sigmoid(theta_old)[None]
    pi_new = np.where(actions == 1, p_new, 1 - p_new)
    pi_old = np.where(actions == 1, p_old, 1 - p_old)
    rho = pi_new / pi_old
    unclipped = rho * adv
    clipped = np.clip(rho, 1 - clip_eps, 1 + clip_eps) * adv
    active = unclipped <= clipped                    # min picks the unclipped term: gradient flows
    grad = (active * adv * rho * (actions - p_new)).mean(0)
    return grad, float(1 - active.mean())


def train_ppo(task: ToyTask | None = None, kind: str = "hindsight", *, iterations: int = 60,
              batch: int = 64, epochs: int = 4, lr: float = 1.0, clip_eps: float = 0.2,
              critic_lr: float = 0.1, lam: float = 0.95, seed: int = 0,
              normalize: bool = True) -> dict[str, np.ndarray]:
    """Asymmetric PPO as KAT-Coder-V2.5 describes it, on the toy task: the actor sees only the
    history (its logits do not read any hidden fact); the critic ``kind`` reads what
    :func:`critic_keys` gives it; advantages are GAE from that critic, normalised per batch (zero
    mean, unit std over every (episode, step) term: standard PPO; ``normalize=False`` keeps the raw
    GAE values); the actor takes ``epochs`` steps of the standard clipped PPO objective on each batch;
    the critic regresses the GAE return targets ``A + V`` (the raw, unnormalised ones). Returns per
    iteration the batch success rate, the std of the raw advantages and the share of clipped terms
    over the epochs after the first (the first epoch's ratio is always 1), and the fitted ``critic``.
    Introduced in lesson 09."""
    task = task or ToyTask()
    rng = np.random.default_rng(seed)
    theta = initial_theta(task)
    critic = TabularCritic(kind, lr=critic_lr, init=0.0)
    success, adv_std, clipped = [], [], []
    for _ in range(iterations):
        ep = sample_episodes(task, theta, batch, rng)
        values = critic(ep)
        adv, returns = gae(ep.rewards, values, 1.0, lam)
        actor_adv = (adv - adv.mean()) / (adv.std() + 1e-8) if normalize else adv
        theta_old = theta.copy()
        shares = []
        for epoch in range(epochs):
            grad, share = clipped_ppo_step(theta, theta_old, ep, actor_adv, clip_eps)
            if epoch:
                shares.append(share)
            theta = theta + lr * grad
        critic.fit(ep, returns)
        success.append(float(ep.success.mean()))
        adv_std.append(float(adv.std()))
        clipped.append(float(np.mean(shares)) if shares else 0.0)
    return {"success": np.array(success), "adv_std": np.array(adv_std), "clipped": np.array(clipped),
            "critic": critic}


def ppo_experiment(task: ToyTask | None = None, kinds: tuple[str, ...] = ("history", "hindsight"), *,
                   seeds: int = 10, iterations: int = 60, last: int = 10, first_seed: int = 0,
                   **kw) -> dict[str, dict]:
    """:func:`train_ppo` for each critic over ``seeds`` seeds ``first_seed, first_seed + 1, …`` (seed s of
    every critic starts from the same random stream, so the runs are paired): the success curves (seeds × iterations), per seed the
    mean success over all iterations (``auc``: how fast it learned) and over the ``last`` iterations
    (``final``), the mean advantage std and the mean clipped share, and their means and standard
    deviations over seeds. Introduced in lesson 09."""
    if seeds < 2:
        raise ValueError("a spread needs at least two seeds")
    out = {}
    for kind in kinds:
        runs = [train_ppo(task, kind, iterations=iterations, seed=first_seed + s, **kw) for s in range(seeds)]
        curves = np.array([r["success"] for r in runs])
        final = curves[:, -last:].mean(1)
        auc = curves.mean(1)
        adv = np.array([r["adv_std"].mean() for r in runs])
        clipped = np.array([r["clipped"] for r in runs])
        out[kind] = {"curves": curves, "final": final, "final_mean": float(final.mean()),
                     "final_std": float(final.std(ddof=1)), "auc": auc, "auc_mean": float(auc.mean()),
                     "auc_std": float(auc.std(ddof=1)), "adv_std": adv,
                     "adv_std_mean": float(adv.mean()), "adv_std_sd": float(adv.std(ddof=1)),
                     "clipped": clipped, "clipped_mean": float(clipped.mean())}
    return out


# two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (then the normal's 1.96)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def paired_difference(a: np.ndarray, b: np.ndarray) -> dict[str, float | str]:
    """``a - b`` paired by seed: mean, sd, standard error, the 95% t-interval, how many seeds ``a``
    won, and a verdict: ``"a higher"`` / ``"b higher"`` when the interval excludes 0, else
    ``"no measurable difference"``. Introduced in lesson 09."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"need two equal-length 1-D arrays of >= 2 paired seeds, got {a.shape} and {b.shape}")
    d = a - b
    n = d.size
    sd = float(d.std(ddof=1))
    se = sd / np.sqrt(n)
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    lo, hi = float(d.mean() - t * se), float(d.mean() + t * se)
    verdict = "a higher" if lo > 0 else ("b higher" if hi < 0 else "no measurable difference")
    return {"mean": float(d.mean()), "sd": sd, "se": float(se), "ci95": (lo, hi), "wins": int((d > 0).sum()),
            "ties": int((d == 0).sum()), "n": n, "verdict": verdict}
