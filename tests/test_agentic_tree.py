"""Tree training: the packed loss and every parameter gradient equal unpacked training."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.agentic.tree import (
    ancestor_mask,
    make_branching_tree,
    pack_tree,
    packed_loss,
    sharing_stats,
    unpacked_loss,
)
from tests._agentic_helpers import tiny_qwen2

SEQS = [
    [5, 6, 7, 8, 9, 10, 11, 12],
    [5, 6, 7, 8, 20, 21, 22],
    [5, 6, 7, 8, 20, 30, 31, 32, 33],
    [5, 6, 40, 41],
    [50, 51, 52],                       # a second root: the packed sequence is a forest
]
MASKS = [[0, 0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1, 1, 1],
         [0, 1, 1, 1], [1, 1, 1]]


def _grads(loss, model):
    return torch.autograd.grad(loss, [p for p in model.parameters()])


def _max_grad_diff(g1, g2):
    return max((a - b).abs().max().item() for a, b in zip(g1, g2))


def test_pack_tree_structure():
    p = pack_tree(SEQS)
    assert p.num_unpacked_tokens == sum(map(len, SEQS))
    assert p.num_nodes == 8 + 3 + 4 + 2 + 3
    # every trajectory is recovered from its nodes, with its own positions
    for seq, nodes in zip(SEQS, p.branch_nodes):
        assert p.input_ids[nodes].tolist() == seq
        assert p.position_ids[nodes].tolist() == list(range(len(seq)))
    # the shared node "8" (depth 3) is on three trajectories
    assert p.loss_weight[p.branch_nodes[0][3]].item() == 3.0
    assert p.loss_weight[p.branch_nodes[0][0]].item() == 0.0   # first tokens are never predicted


def test_ancestor_mask_is_causal_for_one_path_and_blocks_siblings():
    single = pack_tree([[1, 2, 3, 4]])
    assert torch.equal(ancestor_mask(single.parent), torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    p = pack_tree(SEQS)
    mask = ancestor_mask(p.parent)
    a, b = p.branch_nodes[0], p.branch_nodes[1]
    assert mask[b[-1], a[3]] and not mask[b[-1], a[4]]   # sees the shared prefix, not the sibling
    assert not mask[p.branch_nodes[4][-1], a[0]]          # different roots never see each other


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_packed_loss_and_every_gradient_equal_unpacked(attn):
    model = tiny_qwen2(attn, initializer_range=0.1)
    packed = pack_tree(SEQS, MASKS)
    ref = unpacked_loss(model, SEQS, MASKS)
    got = packed_loss(model, packed)
    assert abs(got.item() - ref.item()) < 1e-5
    g_ref, g_got = _grads(ref, model), _grads(got, model)
    names = [n for n, _ in model.named_parameters()]
    for name, a, b in zip(names, g_got, g_ref):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), f"gradient of {name} differs"


def test_wrong_position_ids_are_caught():
    model = tiny_qwen2("sdpa", initializer_range=0.1)
    packed = pack_tree(SEQS, MASKS)
    g_ref = _grads(unpacked_loss(model, SEQS, MASKS), model)
    wrong = packed_loss(model, packed, position_ids=torch.arange(packed.num_nodes))
    assert _max_grad_diff(_grads(wrong, model), g_ref) > 1e-4


def test_loss_weights_without_branch_count_are_caught():
    model = tiny_qwen2("sdpa", initializer_range=0.1)
    packed = pack_tree(SEQS, MASKS)
    ref = unpacked_loss(model, SEQS, MASKS)
    unweighted = packed_loss(model, packed, loss_weight=(packed.loss_weight > 0).float())
    assert abs(unweighted.item() - ref.item()) > 1e-3


def test_causal_mask_instead_of_tree_mask_is_caught():
    model = tiny_qwen2("sdpa", initializer_range=0.1)
    packed = pack_tree(SEQS, MASKS)
    ref = unpacked_loss(model, SEQS, MASKS)
    # a plain causal mask lets a branch see its siblings: the loss changes
    out = model(input_ids=packed.input_ids[None], position_ids=packed.position_ids[None])
    logits = out.logits[0]
    has_parent = packed.parent >= 0
    tl = torch.nn.functional.cross_entropy(logits[packed.parent[has_parent]],
                                           packed.input_ids[has_parent], reduction="none")
    causal = (tl * packed.loss_weight[has_parent]).sum() / packed.num_loss_tokens
    assert abs(causal.item() - ref.item()) > 1e-4


def test_sharing_stats_follow_the_shared_ratio():
    seqs = make_branching_tree(16, 100, 0.9, vocab_size=1000)
    stats = sharing_stats(seqs)
    assert stats["unpacked_tokens"] == 1600
    assert stats["packed_tokens"] == 90 + 16 * 10
    assert stats["token_speedup"] == pytest.approx(1600 / 250)


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="sequence 1"):
        pack_tree([[1, 2], [3, 4]], [[1, 1], [1]])


def test_float_token_weights_give_the_unpacked_loss_and_gradients():
    """Per-token advantages (any sign) as weights: shared nodes sum the weights of their trajectories."""
    model = tiny_qwen2("sdpa", initializer_range=0.1)
    g = torch.Generator().manual_seed(0)
    weights = [[round(float(x), 3) * m for x, m in zip(torch.randn(len(mk), generator=g), mk)] for mk in MASKS]
    packed = pack_tree(SEQS, weights)
    ref, got = unpacked_loss(model, SEQS, weights), packed_loss(model, packed)
    assert abs(got.item() - ref.item()) < 1e-5
    for a, b in zip(_grads(got, model), _grads(ref, model)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)
    shared = packed.branch_nodes[0][3]                  # token "8" on trajectories 0, 1 and 2
    assert packed.loss_weight[shared].item() == pytest.approx(sum(weights[b][3] for b in range(3)))


# --- PPO clipping on a packed tree: exact only with per-trajectory terms -------------------------

def test_summing_advantages_on_a_shared_token_breaks_under_clipping():
    """One shared token, ratio 1.5, advantages +1 and -1 on the two trajectories through it: unpacked,
    the clipped loss has gradient 0.75 w.r.t. the token's log-prob; with the advantages summed onto the
    node (weight 0) it has none. Per-trajectory terms on the shared log-prob get it right."""
    from course_lib.agentic.grpo import clipped_surrogate

    logp = torch.tensor(np.log(1.5), requires_grad=True)
    unpacked = clipped_surrogate(logp.exp().repeat(1, 2), torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
    (g_unpacked,) = torch.autograd.grad(unpacked, logp)
    summed = clipped_surrogate(logp.exp()[None, None], torch.tensor([[0.0]]), torch.ones(1, 1))
    (g_summed,) = torch.autograd.grad(summed, logp, allow_unused=True)
    assert g_unpacked.item() == pytest.approx(0.75)
    assert g_summed is None or g_summed.item() == 0.0


def _row_logprobs(model, seqs):
    out = []
    for s in seqs:
        ids = torch.tensor([s])
        lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        out.append(lp.gather(-1, ids[0, 1:, None])[:, 0])
    return out


def test_packed_clipped_loss_equals_the_unpacked_one_with_every_gradient():
    from course_lib.agentic.grpo import clipped_surrogate
    from course_lib.agentic.tree import packed_clipped_loss, packed_token_logprobs

    model = tiny_qwen2("sdpa", initializer_range=0.1)
    seqs = SEQS[:4]
    g = torch.Generator().manual_seed(0)
    advs = [[0.0] + [float(a)] * (len(s) - 1) for s, a in zip(seqs, [1.0, -1.0, 0.5, -2.0])]
    packed = pack_tree(seqs)
    with torch.no_grad():                       # the old policy: a slightly different model
        old_rows = [lp + 0.4 * torch.randn(lp.shape, generator=g) for lp in _row_logprobs(model, seqs)]
    old_nodes = torch.zeros(packed.num_nodes)
    for nodes, lp in zip(packed.branch_nodes, old_rows):
        old_nodes[nodes[1:]] = lp
    # the old log-probs of a shared node must agree across trajectories for this comparison
    for nodes, lp in zip(packed.branch_nodes, old_rows):
        lp.copy_(old_nodes[nodes[1:]])
    new_rows = _row_logprobs(model, seqs)
    ref = clipped_surrogate(torch.exp(torch.cat(new_rows) - torch.cat(old_rows)),
                            torch.tensor([a for adv in advs for a in adv[1:]]), torch.ones(1, sum(len(s) - 1 for s in seqs))[0])
    got = packed_clipped_loss(packed_token_logprobs(model, packed), old_nodes, packed, advs)
    assert got.item() == pytest.approx(ref.item(), abs=1e-6)
    ratios = torch.exp(torch.cat(new_rows) - torch.cat(old_rows)).detach()
    assert ((ratios < 0.8) | (ratios > 1.2)).any()                 # the clip is active somewhere
    for a, b in zip(_grads(got, model), _grads(ref, model)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)
    # the shortcut (advantages summed onto shared nodes as float weights) gives another loss
    summed = pack_tree(seqs, advs)
    shortcut = clipped_surrogate(torch.exp(packed_token_logprobs(model, packed) - old_nodes)[None],
                                 summed.loss_weight[None], (summed.loss_weight != 0).float()[None])
    assert abs(shortcut.item() - ref.item()) > 1e-3


# --- trie packing under a memory limit -----------------------------------------------------------

def _task_trajectories(seed=0, tasks=5, branches=4, prompt=30):
    import random

    rng = random.Random(seed)
    seqs = []
    for _ in range(tasks):
        p = [rng.randrange(1, 300) for _ in range(prompt)]
        for _ in range(branches):
            seqs.append(p + [rng.randrange(1, 300) for _ in range(rng.randrange(5, 20))])
    rng.shuffle(seqs)
    return seqs


def test_pack_under_budget_respects_the_budget_and_beats_arrival_order():
    from course_lib.agentic.tree import first_fit_packs, pack_under_budget, packing_cost

    seqs = _task_trajectories()
    for budget in (60, 120, 250):
        packs = pack_under_budget(seqs, budget)
        assert sorted(i for p in packs for i in p) == list(range(len(seqs)))     # each exactly once
        assert all(packing_cost(seqs, [p]) <= budget for p in packs)
        assert packing_cost(seqs, packs) <= packing_cost(seqs, first_fit_packs(seqs, budget))
    assert packing_cost(seqs, pack_under_budget(seqs, 120)) < packing_cost(seqs, first_fit_packs(seqs, 120))
    with pytest.raises(ValueError, match="sequence"):
        pack_under_budget(seqs, 20)


def test_pack_under_budget_is_optimal_among_contiguous_cuts_of_the_sorted_order():
    import itertools

    from course_lib.agentic.tree import pack_under_budget, packing_cost

    seqs = _task_trajectories(seed=3, tasks=3, branches=3, prompt=8)
    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    budget = 45
    best = float("inf")
    for cuts in itertools.product([0, 1], repeat=len(order) - 1):     # every contiguous partition
        packs, cur = [], [order[0]]
        for c, i in zip(cuts, order[1:]):
            if c:
                packs.append(cur)
                cur = []
            cur.append(i)
        packs.append(cur)
        if all(packing_cost(seqs, [p]) <= budget for p in packs):
            best = min(best, packing_cost(seqs, packs))
    assert packing_cost(seqs, pack_under_budget(seqs, budget)) == best
