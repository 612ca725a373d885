"""Tree training: the packed loss and every parameter gradient equal unpacked training."""
from __future__ import annotations

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
