"""GRPO advantages and their weighting: invariants a plausible bug would break."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.agentic.grpo import (
    clipped_surrogate,
    difficulty_weights,
    dynamic_sampling_filter,
    entropy_weights,
    group_advantages,
    length_stratified_batches,
    mean_token_entropy,
    offline_difficulty_filter,
    task_difficulty,
    weighted_advantages,
)
from course_lib.agentic.rule_rewards import ToolCall, Trajectory, rule_reward


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


def test_entropy_weights_are_clipped():
    w = entropy_weights([0.01, 1.0, 10.0, 0.02])
    assert w.max() == 2.0 and w.min() == 0.5                 # without the clip: 3.89 and 0.004


def test_surrogate_is_normalised_by_the_mask_sum_not_the_element_count():
    ratio = torch.ones(2, 4)
    adv = torch.tensor([[1.0, 1.0, 5.0, 5.0], [2.0, 7.0, 7.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])   # padding carries junk advantages
    loss = clipped_surrogate(ratio, adv, mask, clip_eps=0.2)
    assert loss.item() == pytest.approx(-(1 + 1 + 2) / 3)            # numel would give -4/8


def test_dynamic_sampling_drops_all_correct_and_all_wrong_groups():
    groups = [[1] * 8, [0] * 8, [1, 0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 0]]
    assert offline_difficulty_filter(groups) == [2, 3]
    with pytest.warns(DeprecationWarning):
        assert dynamic_sampling_filter(groups) == [2, 3]      # the old name, one more release
    with pytest.raises(ValueError, match="k=8"):
        offline_difficulty_filter([[1, 0, 1]])


def test_length_stratified_batches_mix_every_length_band():
    lengths = [10, 5000, 20, 4000, 30, 3000, 40, 2000, 50, 1000, 60, 900]
    batches = length_stratified_batches(lengths, batch_size=4, num_strata=2, seed=0)
    assert len(batches) == 3 and sorted(i for b in batches for i in b) == list(range(12))
    for b in batches:                                            # one short and one long pair in each
        assert sum(lengths[i] >= 900 for i in b) == 2
    with pytest.raises(ValueError, match="multiple"):
        length_stratified_batches(lengths, batch_size=5, num_strata=2)


def test_verifying_a_fix_in_a_later_turn_costs_no_advantage():
    """Four rollouts that all fix the bug: two re-run the tests in a later turn to verify the fix, two
    do not. The repeated-call rule is per turn, so after GRPO normalisation the verifiers get no
    negative advantage (the group is all-equal: zero everywhere). A rollout that repeats the same
    call inside one turn is the one the rule penalises."""
    f2p, p2p, gold, schemas = ["t1"], ["t2"], ["a.py"], {"run_tests": ["cmd"], "edit": ["path"]}
    ok = {"t1": True, "t2": True}
    test = '{"cmd": "pytest -q"}'
    plain = [ToolCall("run_tests", test, turn=0), ToolCall("edit", '{"path": "a.py"}', turn=1)]
    verify = plain + [ToolCall("run_tests", test, turn=2)]
    rollouts = [plain, verify, plain, verify]
    rewards = [rule_reward(Trajectory("fixed", c, ["a.py"], ok), f2p, p2p, gold, schemas)["reward"]
               for c in rollouts]
    adv = group_advantages(rewards)
    assert np.all(adv[[1, 3]] >= 0) and np.allclose(adv, 0)
    looping = verify + [ToolCall("run_tests", test, turn=2)]            # same call twice in turn 2
    rewards.append(rule_reward(Trajectory("fixed", looping, ["a.py"], ok), f2p, p2p, gold, schemas)["reward"])
    adv = group_advantages(rewards)
    assert adv[4] < 0 and np.all(adv[[1, 3]] > 0)


def test_exercise_accepts_epsilon_inside_the_square_root():
    from course_lib import exercises

    def inside(rewards, eps=1e-6):
        r = np.asarray(rewards, dtype=float)
        return (r - r.mean()) / np.sqrt(r.var() + eps)

    assert exercises.check("09-1", inside, strict=True) is inside


# --- the clip on both sides: the cases a one-sided clip gets wrong --------------------------------

@pytest.mark.parametrize("ratio,adv,clipped,value", [
    (0.5, -1.0, True, 0.8),       # A < 0, ratio below 1 - eps: the LOWER side binds (no gradient)
    (1.5, -1.0, False, 1.5),      # A < 0, ratio above 1 + eps: pessimistic min keeps the unclipped term
    (1.5, 1.0, True, -1.2),       # A > 0, ratio above 1 + eps: the upper side binds
    (0.5, 1.0, False, -0.5),      # A > 0, ratio below 1 - eps: unclipped, the gradient flows
    (0.9, -2.0, False, 1.8),      # inside the range: plain ratio * A
])
def test_clipped_surrogate_binds_on_the_correct_side(ratio, adv, clipped, value):
    logr = torch.tensor([[np.log(ratio)]], requires_grad=True)
    loss = clipped_surrogate(logr.exp(), torch.tensor([[adv]]), torch.ones(1, 1), clip_eps=0.2)
    (g,) = torch.autograd.grad(loss, logr)
    assert loss.item() == pytest.approx(value, abs=1e-6)
    if clipped:
        assert g.item() == 0.0
    else:
        assert g.item() == pytest.approx(-ratio * adv, rel=1e-5)     # d(-rho A)/d log rho


def test_weighted_advantages_take_the_success_layer_of_a_shaped_reward():
    """A rule reward can be negative (penalties) or above 1: the difficulty needs the successes."""
    rewards = [[1.0, 0.85, -0.1, 0.3], [-0.2, 0.1, 0.0, 0.3]]
    successes = [[1, 1, 0, 0], [0, 0, 0, 0]]
    with pytest.raises(ValueError, match="groups_successes"):
        weighted_advantages(rewards)
    adv = weighted_advantages(rewards, groups_successes=successes)
    assert np.allclose(adv[0], group_advantages(rewards[0]) * 1.0)      # the only group with a signal: D / mean D = 1
    assert np.allclose(adv[1], group_advantages(rewards[1]) * 2.0)      # all failed: D = 1, twice the mean D = 0.5
    with pytest.raises(ValueError, match="one success per reward"):
        weighted_advantages(rewards, groups_successes=[[1, 0], [0, 0]])


def test_the_mutation_list_matches_the_code():
    """tests/_agentic_mutations.py applies plausible bugs to course_lib/agentic and runs the tests that
    must fail (run it after changing the RL code). Each mutant's text must still occur exactly once."""
    from tests._agentic_mutations import MUTANTS, ROOT

    for name, file, old, _new, tests in MUTANTS:
        source = (ROOT / "course_lib" / "agentic" / file).read_text(encoding="utf-8")
        assert source.count(old) == 1, f"mutant {name}: its text occurs {source.count(old)} times in {file}"
        assert all((ROOT / t.split("::")[0]).exists() for t in tests), name
