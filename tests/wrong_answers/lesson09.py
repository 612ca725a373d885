"""Plausible wrong answers to lesson 09's exercises."""
from __future__ import annotations

import numpy as np


def sample_std(rewards, eps=1e-6):              # ddof=1
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / (r.std(ddof=1) + eps)


def no_eps(rewards, eps=1e-6):                  # all-equal groups divide 0 by 0
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / r.std()


def mean_only(rewards, eps=1e-6):               # forgets to scale
    r = np.asarray(rewards, dtype=float)
    return r - r.mean()


def divides_by_max(rewards, eps=1e-6):
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / (np.abs(r - r.mean()).max() + eps)


def _pr(predicted, gold):
    pred, gold = set(predicted), set(gold)
    tp = len(pred & gold)
    return tp / len(pred), tp / len(gold)


def f1_always(predicted, gold, beta=2.0):       # ignores beta
    if not set(predicted) and not set(gold):
        return 1.0
    if not set(predicted) & set(gold):
        return 0.0
    p, r = _pr(predicted, gold)
    return 2 * p * r / (p + r)


def swapped_precision_recall(predicted, gold, beta=2.0):
    if not set(predicted) and not set(gold):
        return 1.0
    if not set(predicted) & set(gold):
        return 0.0
    r, p = _pr(predicted, gold)
    return (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


def beta_not_squared(predicted, gold, beta=2.0):
    if not set(predicted) and not set(gold):
        return 1.0
    if not set(predicted) & set(gold):
        return 0.0
    p, r = _pr(predicted, gold)
    return (1 + beta) * p * r / (beta * p + r)


def lists_not_sets(predicted, gold, beta=2.0):  # duplicates count twice
    if not predicted and not gold:
        return 1.0
    tp = sum(x in gold for x in predicted)
    if tp == 0:
        return 0.0
    p, r = tp / len(predicted), tp / len(gold)
    return (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


def empty_is_zero(predicted, gold, beta=2.0):
    if not set(predicted) & set(gold):
        return 0.0
    p, r = _pr(predicted, gold)
    return (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


# --- 09-3: the clipped objective ----------------------------------------------------------------

def clip_upper_only(ratios, advantages, eps=0.2):          # clamp(max=1+eps): the lower side removed
    return [min(r * a, min(r, 1 + eps) * a) for r, a in zip(ratios, advantages)]


def max_not_min(ratios, advantages, eps=0.2):              # optimistic instead of pessimistic
    return [max(r * a, min(max(r, 1 - eps), 1 + eps) * a) for r, a in zip(ratios, advantages)]


def clip_without_min(ratios, advantages, eps=0.2):         # always the clipped term
    return [min(max(r, 1 - eps), 1 + eps) * a for r, a in zip(ratios, advantages)]


def eps_fixed(ratios, advantages, eps=0.2):                # ignores the eps argument
    return [min(r * a, min(max(r, 0.8), 1.2) * a) for r, a in zip(ratios, advantages)]


def clips_the_advantage(ratios, advantages, eps=0.2):
    return [min(r * a, r * min(max(a, 1 - eps), 1 + eps)) for r, a in zip(ratios, advantages)]


# --- 09-4: turn-level ratios ---------------------------------------------------------------------

def _turn_groups(turn_ids, mask):
    groups = {}
    for i, (t, m) in enumerate(zip(turn_ids, mask)):
        if m:
            groups.setdefault(t, []).append(i)
    return groups


def arithmetic_mean_of_ratios(logp_new, logp_old, turn_ids, mask):
    import math
    out = [1.0] * len(logp_new)
    for idx in _turn_groups(turn_ids, mask).values():
        r = sum(math.exp(logp_new[i] - logp_old[i]) for i in idx) / len(idx)
        for i in idx:
            out[i] = r
    return out


def token_ratios_only(logp_new, logp_old, turn_ids, mask):
    import math
    return [math.exp(n - o) if m else 1.0 for n, o, m in zip(logp_new, logp_old, mask)]


def one_ratio_per_trajectory(logp_new, logp_old, turn_ids, mask):
    import math
    idx = [i for i, m in enumerate(mask) if m]
    r = math.exp(sum(logp_new[i] - logp_old[i] for i in idx) / len(idx))
    return [r if m else 1.0 for m in mask]


def mask_ignored(logp_new, logp_old, turn_ids, mask):
    import math
    out = [0.0] * len(logp_new)
    for idx in _turn_groups(turn_ids, [1] * len(mask)).values():
        r = math.exp(sum(logp_new[i] - logp_old[i] for i in idx) / len(idx))
        for i in idx:
            out[i] = r
    return out


# --- 09-5: GAE -----------------------------------------------------------------------------------

def gae_without_lambda(rewards, values, gamma=1.0, lam=0.95):
    out, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        nxt = values[t + 1] if t + 1 < len(values) else 0.0
        running = rewards[t] + gamma * nxt - values[t] + gamma * running
        out[t] = running
    return out


def gae_without_bootstrap(rewards, values, gamma=1.0, lam=0.95):   # delta = r - V
    out, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] - values[t] + gamma * lam * running
        out[t] = running
    return out


def monte_carlo_minus_value(rewards, values, gamma=1.0, lam=0.95):
    out, ret = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        ret = rewards[t] + gamma * ret
        out[t] = ret - values[t]
    return out


def gae_forward_loop(rewards, values, gamma=1.0, lam=0.95):        # accumulates in the wrong direction
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards)):
        nxt = values[t + 1] if t + 1 < len(values) else 0.0
        running = rewards[t] + gamma * nxt - values[t] + gamma * lam * running
        out[t] = running
    return out


def gae_returns_not_advantages(rewards, values, gamma=1.0, lam=0.95):
    out, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        nxt = values[t + 1] if t + 1 < len(values) else 0.0
        running = rewards[t] + gamma * nxt - values[t] + gamma * lam * running
        out[t] = running + values[t]
    return out


# --- 09-6: reverse KL ----------------------------------------------------------------------------

def forward_kl(p_student, p_teacher):
    import math
    return sum(t * math.log(t / s) for s, t in zip(p_student, p_teacher) if t > 0)


def unweighted_log_ratio(p_student, p_teacher):
    import math
    return sum(math.log(s / t) for s, t in zip(p_student, p_teacher) if s > 0)


def nan_on_zero(p_student, p_teacher):
    import numpy as np
    s, t = np.asarray(p_student), np.asarray(p_teacher)
    with np.errstate(all="ignore"):
        return float((s * np.log(s / t)).sum())


def log2_kl(p_student, p_teacher):
    import math
    return sum(s * math.log2(s / t) for s, t in zip(p_student, p_teacher) if s > 0)


# --- 09-7: the top-k gate ------------------------------------------------------------------------

def gate_never_cuts(overlaps, threshold=0.25, run=4):
    return list(overlaps)


def gate_restores_after_the_run(overlaps, threshold=0.25, run=4):   # zeroes only the low run itself
    out, streak = list(overlaps), 0
    for t, o in enumerate(overlaps):
        streak = streak + 1 if o < threshold else 0
        if streak >= run:
            out[t] = 0.0
    return out


def gate_binary_weights(overlaps, threshold=0.25, run=4):
    out, streak = [1.0] * len(overlaps), 0
    for t, o in enumerate(overlaps):
        streak = streak + 1 if o < threshold else 0
        if streak >= run:
            return out[:t] + [0.0] * (len(overlaps) - t)
    return out


def gate_counts_all_low_tokens(overlaps, threshold=0.25, run=4):   # the streak is never reset
    out, low = list(overlaps), 0
    for t, o in enumerate(overlaps):
        low += o < threshold
        if low >= run:
            return out[:t] + [0.0] * (len(overlaps) - t)
    return out


def gate_cuts_the_whole_run(overlaps, threshold=0.25, run=4):       # also zeroes the run's first tokens
    out, streak = list(overlaps), 0
    for t, o in enumerate(overlaps):
        streak = streak + 1 if o < threshold else 0
        if streak >= run:
            return out[:t - run + 1] + [0.0] * (len(overlaps) - t + run - 1)
    return out


def gate_threshold_inclusive(overlaps, threshold=0.25, run=4):
    out, streak = list(overlaps), 0
    for t, o in enumerate(overlaps):
        streak = streak + 1 if o <= threshold else 0
        if streak >= run:
            return out[:t] + [0.0] * (len(overlaps) - t)
    return out


def eps_unused(rewards, eps=1e-6):                  # issue 34: takes eps, divides by std + 1e-6 anyway
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / (r.std() + 1e-6)


def masked_tokens_get_the_turn_ratio(logp_new, logp_old, turn_ids, mask):   # issue 34: 1.0 only off-turn
    out = []
    for t in turn_ids:
        d = [n - o for n, o, u, m in zip(logp_new, logp_old, turn_ids, mask) if u == t and m]
        out.append(float(np.exp(sum(d) / len(d))) if d else 1.0)
    return out


WRONG_ANSWERS = {
    "09-1": [sample_std, no_eps, mean_only, divides_by_max, eps_unused],
    "09-2": [clip_upper_only, max_not_min, clip_without_min, eps_fixed, clips_the_advantage],
    "09-3": [arithmetic_mean_of_ratios, token_ratios_only, one_ratio_per_trajectory, mask_ignored,
             masked_tokens_get_the_turn_ratio],
    "09-4": [gae_without_lambda, gae_without_bootstrap, monte_carlo_minus_value, gae_forward_loop,
             gae_returns_not_advantages],
    "09-5": [f1_always, swapped_precision_recall, beta_not_squared, lists_not_sets, empty_is_zero],
    "09-6": [forward_kl, unweighted_log_ratio, nan_on_zero, log2_kl],
    "09-7": [gate_never_cuts, gate_restores_after_the_run, gate_binary_weights, gate_counts_all_low_tokens,
             gate_cuts_the_whole_run, gate_threshold_inclusive],
}
