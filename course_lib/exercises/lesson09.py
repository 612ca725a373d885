"""Lesson 09's exercises: group-normalised advantages, the F-beta localisation score, and the
RL-critical code: the clipped objective on both sides, the turn-level ratio, GAE, the reverse KL and
the top-k gate. Introduced in lesson 09."""
from __future__ import annotations

from course_lib.exercises import Exercise
from course_lib.exercises.checks import numbers_close, values_equal


def reference_group_advantages(rewards, eps=1e-6):
    from course_lib.agentic.grpo import group_advantages

    return group_advantages(rewards, eps)


def reference_f_beta(predicted, gold, beta=2.0):
    from course_lib.agentic.rule_rewards import f_beta

    return f_beta(predicted, gold, beta)


def reference_clipped_objective(ratios, advantages, eps=0.2):
    """Per token ``min(r A, clip(r, 1 - eps, 1 + eps) A)`` (the objective PPO maximises)."""
    import torch

    from course_lib.agentic.grpo import clipped_surrogate

    return [-float(clipped_surrogate(torch.tensor([[float(r)]]), torch.tensor([[float(a)]]), torch.ones(1, 1), eps))
            for r, a in zip(ratios, advantages)]


def reference_turn_ratios(logp_new, logp_old, turn_ids, mask):
    """Per token: exp(mean over the masked tokens of its turn of logp_new - logp_old); 1.0 off the mask."""
    import torch

    from course_lib.agentic.turns import turn_ratios

    t = lambda x: torch.tensor([x], dtype=torch.float64)
    return turn_ratios(t(logp_new), t(logp_old), torch.tensor([turn_ids]), t(mask))[0].tolist()


def reference_gae(rewards, values, gamma=1.0, lam=0.95):
    from course_lib.agentic.critic import gae

    return gae(rewards, values, gamma, lam)[0].tolist()


def reference_reverse_kl(p_student, p_teacher):
    """KL(student || teacher) of two probability lists (terms with p_student = 0 are 0)."""
    import torch

    from course_lib.agentic.distill import reverse_kl_per_token

    return float(reverse_kl_per_token(torch.tensor(p_student, dtype=torch.float64).log(),
                                      torch.tensor(p_teacher, dtype=torch.float64).log()))


def reference_gate(overlaps, threshold=0.25, run=4):
    import torch

    from course_lib.agentic.distill import gate_weights

    return gate_weights(torch.tensor([overlaps], dtype=torch.float64), threshold, run)[0].tolist()


def _close(got, expected):
    """Agreement to 1e-4: ``(r - mean) / sqrt(var + eps)`` is as right as ``/ (std + eps)``."""
    return values_equal(got, expected, rel=1e-4, abs_=1e-4)


def _close6(got, expected):
    return numbers_close(got, expected, 1e-6)


EXERCISES = [
    Exercise(
        id="09-1", name="my_group_advantages", reference=reference_group_advantages, compare=_close,
        description="(r - mean) / (population std + eps)",
        cases=[([1, 0, 0, 1],), ([1, 0],), ([0.2, 0.5, 0.9, 0.1, 0.0],), ([1, 1, 1, 1],), ([0, 0, 0, 1],),
               ([3.0, -1.0, 2.0],),
               # eps is an argument: 0.5 / (0.5 + 0.002), not 0.5 / (0.5 + 1e-6). With std 0.5 the form
               # sqrt(var + eps) agrees with std + eps to 1e-5, so both right forms pass and an unused eps fails
               ([1, 0], 0.002),
               ([1, 1, 0, 0], 0.002),
               ([2, 2, 2], 1.0)]),
    Exercise(
        id="09-2", name="my_clipped_objective", reference=reference_clipped_objective, compare=_close6,
        description="per-token min(r*A, clip(r, 1-eps, 1+eps)*A): the clip binds on both sides",
        cases=[([1.5], [1.0]),                   # A > 0, ratio high: the upper side binds -> 1.2
               ([0.5], [-1.0]),                  # A < 0, ratio low: the LOWER side binds -> -0.8
               ([1.5], [-1.0]),                  # A < 0, ratio high: pessimistic, unclipped -> -1.5
               ([0.5], [1.0]),                   # A > 0, ratio low: unclipped -> 0.5
               ([1.0, 1.1, 0.95], [2.0, -3.0, 0.5]),   # inside the range: r * A
               ([0.7, 1.3, 0.7, 1.3], [-2.0, 2.0, 2.0, -2.0], 0.1)]),   # another eps
    Exercise(
        id="09-3", name="my_turn_ratios", reference=reference_turn_ratios, compare=_close6,
        description="per token: exp(mean over its turn's masked tokens of logp_new - logp_old), 1.0 off the mask",
        cases=[([-1.0, -1.0, -0.5, -0.5], [-1.0, -1.0, -1.0, -1.0], [0, 0, 1, 1], [1, 1, 1, 1]),
               ([0.0, -1.386294, -2.0], [-0.693147, -0.693147, -2.0], [0, 0, 1], [1, 1, 1]),   # ratios 2 and 0.5
               ([-1.0, 2.0, -1.0, -0.2], [-1.0, -1.0, -1.0, -1.0], [0, 0, 0, 1], [1, 0, 1, 1]),  # a masked tool token
               ([-0.1, -0.3, -0.2, -0.4, -0.9, -0.2], [-0.2, -0.2, -0.2, -0.2, -0.2, -0.2], [0, 0, 1, 1, 2, 2],
                [1, 1, 1, 1, 1, 1]),
               # a masked token inside a turn whose ratio is NOT 1: the turn's ratio ignores it, and it gets 1.0
               ([-0.5, 2.0, -1.0, -0.3], [-1.0, -1.0, -1.0, -1.0], [0, 0, 0, 1], [1, 0, 1, 1]),
               ([-0.2, 3.0, -0.8, 0.5, -1.5], [-1.0, -1.0, -1.0, -1.0, -1.0], [0, 0, 1, 1, 1], [1, 0, 0, 1, 1])]),
    Exercise(
        id="09-4", name="my_gae", reference=reference_gae, compare=_close6,
        description="GAE: delta_t = r_t + gamma V_{t+1} - V_t (V after the end = 0), A_t = delta_t + gamma lam A_{t+1}",
        cases=[([0.0, 0.0, 1.0], [0.2, 0.4, 0.5]),
               ([0.0, 0.0, 1.0], [0.2, 0.4, 0.5], 1.0, 0.0),        # lam = 0: one-step TD errors
               ([0.0, 0.0, 1.0], [0.2, 0.4, 0.5], 1.0, 1.0),        # lam = 1: return - V
               ([1.0, -0.5, 0.0, 2.0], [0.5, 0.1, -0.3, 0.8], 0.9, 0.5),
               ([0.0], [0.7])]),
    Exercise(
        id="09-5", name="my_f_beta", reference=reference_f_beta, compare=_close,
        description="F-beta of predicted vs gold files (sets)",
        cases=[(["src/a.py"], ["src/a.py"]), (["src/a.py", "src/b.py", "src/c.py"], ["src/a.py"]),
               (["src/a.py"], ["src/a.py", "src/b.py", "src/c.py"]), ([], ["src/a.py"]), ([], []),
               (["x.py", "y.py"], ["y.py", "z.py"], 1.0), (["a.py", "a.py", "b.py"], ["a.py"]),
               (["a.py", "b.py"], ["a.py", "c.py", "d.py"], 0.5)]),
    Exercise(
        id="09-6", name="my_reverse_kl", reference=reference_reverse_kl, compare=_close6,
        description="KL(student || teacher) = sum p_s log(p_s / p_t); terms with p_s = 0 count 0",
        cases=[([0.5, 0.5], [0.5, 0.5]),
               ([0.9, 0.05, 0.05], [0.4, 0.3, 0.3]),
               ([0.4, 0.3, 0.3], [0.9, 0.05, 0.05]),
               ([0.0, 0.5, 0.5], [0.2, 0.4, 0.4]),                  # a token the student never picks
               ([0.7, 0.2, 0.1], [0.1, 0.2, 0.7])]),
    Exercise(
        id="09-7", name="my_gate", reference=reference_gate, compare=_close6,
        description="weights = overlaps, and 0 from the run-th consecutive overlap < threshold onwards, for good",
        cases=[([0.9, 0.8, 0.1, 0.2, 0.1, 0.0, 0.9, 1.0],),          # cut at the 4th low token, never restored
               ([0.9, 0.1, 0.1, 0.1, 0.8, 0.1, 0.1, 0.9],),          # runs of 3 and 2: down-weighted, never cut
               ([0.1, 0.1, 0.9, 0.1, 0.1, 0.9, 0.1, 0.1],),          # six low tokens, never four in a row
               ([0.5, 0.2, 0.2, 0.6, 0.2, 0.2],),
               ([0.5, 0.2, 0.2, 0.6, 0.2, 0.2], 0.3, 2),             # threshold and run are parameters
               ([0.25, 0.25, 0.25, 0.25, 0.24, 0.9],)]),             # exactly at the threshold is not low
]
