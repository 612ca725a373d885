"""GRPO advantages and the KAT-Coder V1 style weighting of groups and samples.

GRPO samples a *group* of G rollouts per task and uses the group itself as the baseline:
``A_i = (r_i - mean(r)) / (std(r) + eps)``. Two re-weightings follow the V1 report's idea:

* **task difficulty** ``D = 1 - mean success`` of a group; groups harder than the batch average get
  their advantages scaled up (``D / mean D``), easy ones down;
* **entropy** inside a group: samples whose tokens had higher policy entropy (more exploration)
  are scaled up relative to the group mean entropy (weights clipped to a range).

Every weight multiplies an advantage, so a group whose rewards are all equal (all pass or all
fail: zero advantages) stays exactly zero — no learning signal is invented.

Introduced in lesson 09.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import torch

from course_lib.agentic.tree import clipped_surrogate  # noqa: F401  (lesson 08's loss, the one GRPO minimises)


def group_advantages(rewards: Sequence[float], eps: float = 1e-6) -> np.ndarray:
    """Group-normalised advantages ``(r - mean) / (std + eps)`` (population std, ddof=0).
    Introduced in lesson 09."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"rewards must be a non-empty 1-D list of one group, got shape {r.shape}")
    return (r - r.mean()) / (r.std() + eps)


def task_difficulty(successes: Sequence[float]) -> float:
    """``D = 1 - mean success`` of a group (successes in [0, 1]). Introduced in lesson 09."""
    s = np.asarray(successes, dtype=np.float64)
    if np.any((s < 0) | (s > 1)):
        raise ValueError("successes must lie in [0, 1] (pass = 1, fail = 0)")
    return float(1.0 - s.mean())


def difficulty_weights(groups_successes: Sequence[Sequence[float]]) -> np.ndarray:
    """One weight per group: ``D_i / mean_j D_j`` over the groups that carry a signal (not all-equal
    rewards); 1.0 when no group does. Harder than average → weight > 1. Introduced in lesson 09."""
    d = np.array([task_difficulty(g) for g in groups_successes])
    informative = np.array([np.ptp(np.asarray(g, dtype=float)) > 0 for g in groups_successes])
    if not informative.any() or d[informative].mean() == 0:
        return np.ones_like(d)
    return d / d[informative].mean()


def entropy_weights(entropies: Sequence[float], clip: tuple[float, float] = (0.5, 2.0)) -> np.ndarray:
    """Within one group: ``H_j / mean(H)`` clipped to ``clip`` (1.0 everywhere when all entropies are
    zero). Higher-entropy samples are scaled up. Introduced in lesson 09."""
    h = np.asarray(entropies, dtype=np.float64)
    if np.any(h < 0):
        raise ValueError("entropies are non-negative")
    if h.mean() == 0:
        return np.ones_like(h)
    return np.clip(h / h.mean(), *clip)


def weighted_advantages(groups_rewards: Sequence[Sequence[float]],
                        groups_entropies: Sequence[Sequence[float]] | None = None, *,
                        use_difficulty: bool = True, use_entropy: bool = True,
                        eps: float = 1e-6,
                        groups_successes: Sequence[Sequence[float]] | None = None) -> list[np.ndarray]:
    """Group advantages of the rewards × difficulty weight of the group × entropy weight of each sample.

    The difficulty ``D = 1 - mean success`` needs successes in [0, 1]: pass ``groups_successes``
    (e.g. the success layer of :func:`course_lib.agentic.rule_rewards.rule_reward`) when the rewards
    are shaped (a rule reward can be negative or above 1); without it the rewards themselves are read
    as successes and must be 0/1-like. Introduced in lesson 09."""
    if groups_entropies is not None and len(groups_entropies) != len(groups_rewards):
        raise ValueError("one list of entropies per group is needed")
    if groups_successes is not None:
        if len(groups_successes) != len(groups_rewards) or any(
                len(s) != len(r) for s, r in zip(groups_successes, groups_rewards)):
            raise ValueError("groups_successes must have one success per reward, group by group")
    successes = groups_rewards if groups_successes is None else groups_successes
    if use_difficulty:
        try:
            dw = difficulty_weights(successes)
        except ValueError as exc:
            raise ValueError(f"{exc}; these rewards are shaped: pass groups_successes= (1 = the task was "
                             "solved) for the difficulty") from None
    else:
        dw = np.ones(len(groups_rewards))
    out = []
    for i, rewards in enumerate(groups_rewards):
        adv = group_advantages(rewards, eps) * dw[i]
        if use_entropy and groups_entropies is not None:
            if len(groups_entropies[i]) != len(rewards):
                raise ValueError(f"group {i}: {len(rewards)} rewards but {len(groups_entropies[i])} entropies")
            adv = adv * entropy_weights(groups_entropies[i])
        out.append(adv)
    return out


def mean_token_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean policy entropy over the (masked) tokens of each sequence: logits (B, T, V) → (B,).
    Introduced in lesson 09.
    Public: documented in docs/agentic.md, for students to call."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    ent = -(logp.exp() * logp).sum(-1)
    if mask is None:
        return ent.mean(-1)
    mask = mask.float()
    return (ent * mask).sum(-1) / mask.sum(-1).clamp(min=1)


def offline_difficulty_filter(groups_successes: Sequence[Sequence[float]], k: int = 8) -> list[int]:
    """The offline difficulty filter of KAT-Coder-V2's WebSearch expert (sample each question ``k`` = 8
    times, drop the questions answered all-right or all-wrong): indices of the groups that keep a
    learning signal. A one-off data filter before RFT, not DAPO's online dynamic sampling, which
    refills each RL batch with fresh groups until it is full of informative ones (lesson 10). A group
    with other than ``k`` samples is an error. Introduced in lesson 09."""
    keep = []
    for i, g in enumerate(groups_successes):
        s = np.asarray(g, dtype=np.float64)
        if s.size != k:
            raise ValueError(f"group {i} has {s.size} samples; the filter draws k={k} per question")
        if np.any((s != 0) & (s != 1)):
            raise ValueError(f"group {i}: successes must be 0 or 1, got {sorted(set(s.tolist()))}")
        if 0 < s.sum() < k:
            keep.append(i)
    return keep


def dynamic_sampling_filter(groups_successes: Sequence[Sequence[float]], k: int = 8) -> list[int]:
    """Deprecated name of :func:`offline_difficulty_filter` (it is no dynamic sampling); kept for one
    release. Introduced in lesson 09."""
    warnings.warn("dynamic_sampling_filter is deprecated: use offline_difficulty_filter (an offline filter, "
                  "not DAPO's dynamic sampling)", DeprecationWarning, stacklevel=2)
    return offline_difficulty_filter(groups_successes, k=k)


def length_stratified_batches(lengths: Sequence[int], batch_size: int, num_strata: int,
                              seed: int = 0) -> list[list[int]]:
    """Length-stratified batching (KAT-Coder-V2.5, MOPD): sort samples by length into ``num_strata``
    equal strata and fill every batch with the same number of samples from each stratum, so long
    trajectories stay in every batch. Returns lists of sample indices; ``batch_size`` must be a
    multiple of ``num_strata``. Introduced in lesson 09."""
    if batch_size % num_strata:
        raise ValueError(f"batch_size {batch_size} is not a multiple of num_strata {num_strata}")
    rng = np.random.default_rng(seed)
    order = np.argsort(np.asarray(lengths), kind="stable")
    strata = [list(rng.permutation(part)) for part in np.array_split(order, num_strata)]
    per = batch_size // num_strata
    batches = []
    while all(len(s) >= per for s in strata):
        batch = []
        for s in strata:
            batch += [int(x) for x in s[:per]]
            del s[:per]
        batches.append(batch)
    return batches

