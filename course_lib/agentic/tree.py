"""Tree training (trie packing): train many trajectories that share prefixes in one packed sequence.

Agent rollouts of one task branch (parallel tool calls, retries, sub-agents), so their token
sequences share prefixes. Instead of running every branch separately, we store them as a trie,
flatten it depth-first and run the model once:

* each packed token attends only to its own ancestors (the *tree attention mask*),
* each packed token keeps the position id it had in its own trajectory (its depth in the trie),
* the loss of the token that node ``c`` holds is computed from the logits of ``parent(c)`` and is
  weighted by the number of trajectories that pass through ``c`` (and train on it).

Then the packed loss and **every parameter gradient** equal those of training each trajectory
separately (KAT-Coder V1 "Trie Packing"; Tree Training, arXiv 2511.00413).

Introduced in lesson 08.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F


@dataclass
class PackedTree:
    """A prefix trie of trajectories flattened depth-first.

    ``input_ids[i]`` is node i's token, ``parent[i]`` its parent node (-1 for a root),
    ``position_ids[i]`` its depth (= its position in every trajectory that contains it),
    ``loss_weight[i]`` the summed weight of the trajectories that pass through node i (with 0/1 masks:
    how many of them train on its token), and
    ``branch_nodes[b]`` the node indices of trajectory b, in order.
    """

    input_ids: torch.Tensor      # (N,) long
    parent: torch.Tensor         # (N,) long, -1 for roots
    position_ids: torch.Tensor   # (N,) long
    loss_weight: torch.Tensor    # (N,) float
    branch_nodes: list[list[int]]
    num_loss_tokens: int         # non-zero loss-mask entries over all trajectories (the normaliser)

    def tree_mask(self) -> torch.Tensor:
        """The boolean ancestor mask (computed once, then cached)."""
        cached = self.__dict__.get("_tree_mask")
        if cached is None:
            cached = self.__dict__["_tree_mask"] = ancestor_mask(self.parent)
        return cached

    @property
    def num_nodes(self) -> int:
        return int(self.input_ids.numel())

    @property
    def num_unpacked_tokens(self) -> int:
        return sum(len(b) for b in self.branch_nodes)


def pack_tree(sequences: Sequence[Sequence[int]],
              loss_masks: Sequence[Sequence[int]] | None = None) -> PackedTree:
    """Build the prefix trie of ``sequences`` and flatten it depth-first.

    ``loss_masks[b][t]`` (default all 1) is trajectory b's weight on its token t: 0/1 for a loss mask,
    or any float (a per-token advantage for a policy-gradient loss). A shared node's weight is the sum
    of the weights of the trajectories through it, and the normaliser is the number of non-zero
    entries, exactly as :func:`unpacked_loss` computes it (the first token of a sequence is never
    predicted, whatever its weight says). Introduced in lesson 08.
    """
    if not sequences:
        raise ValueError("pack_tree needs at least one sequence")
    if loss_masks is None:
        loss_masks = [[1] * len(s) for s in sequences]
    if len(loss_masks) != len(sequences):
        raise ValueError(f"{len(sequences)} sequences but {len(loss_masks)} loss masks")
    # 1. the trie: children[node] maps token -> child; node 0 is a virtual root
    children: list[dict[int, int]] = [{}]
    token: list[int] = [-1]
    weight: list[float] = [0.0]
    paths: list[list[int]] = []
    for b, (seq, mask) in enumerate(zip(sequences, loss_masks)):
        if len(seq) != len(mask):
            raise ValueError(f"sequence {b}: {len(seq)} tokens but {len(mask)} loss-mask entries")
        if len(seq) == 0:
            raise ValueError(f"sequence {b} is empty")
        node, path = 0, []
        for t, (tok, m) in enumerate(zip(seq, mask)):
            tok = int(tok)
            child = children[node].get(tok)
            if child is None:
                child = len(token)
                children[node][tok] = child
                children.append({})
                token.append(tok)
                weight.append(0.0)
            if t > 0:
                weight[child] += float(m)
            node = child
            path.append(node)
        paths.append(path)
    # 2. depth-first order (iterative, children in insertion order) -> packed index
    order: list[int] = []
    depth = {0: -1}
    stack = list(reversed(children[0].values()))
    parent_of = {c: 0 for c in children[0].values()}
    while stack:
        node = stack.pop()
        order.append(node)
        depth[node] = depth[parent_of[node]] + 1
        for c in reversed(list(children[node].values())):
            parent_of[c] = node
            stack.append(c)
    packed_index = {node: i for i, node in enumerate(order)}
    parent = [packed_index[parent_of[n]] if parent_of[n] != 0 else -1 for n in order]
    num_loss = int(sum(sum(1 for t, m in enumerate(mask) if t > 0 and float(m) != 0) for mask in loss_masks))
    return PackedTree(
        input_ids=torch.tensor([token[n] for n in order], dtype=torch.long),
        parent=torch.tensor(parent, dtype=torch.long),
        position_ids=torch.tensor([depth[n] for n in order], dtype=torch.long),
        loss_weight=torch.tensor([weight[n] for n in order], dtype=torch.float32),
        branch_nodes=[[packed_index[n] for n in path] for path in paths],
        num_loss_tokens=num_loss,
    )


def ancestor_mask(parent: torch.Tensor) -> torch.Tensor:
    """Boolean (N, N) mask: ``mask[i, j]`` is True when node j is node i or one of its ancestors.

    In depth-first order every ancestor comes before its descendants, so the mask is lower
    triangular; it equals the causal mask exactly when the trie is a single path.
    Introduced in lesson 08.
    """
    n = int(parent.numel())
    mask = torch.eye(n, dtype=torch.bool)
    for i in range(n):
        p = int(parent[i])
        if p >= 0:
            if p >= i:
                raise ValueError(f"node {i} has parent {p} after it: the order is not depth-first")
            mask[i] |= mask[p]
    return mask


def attention_bias(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean (N, N) mask into the additive (1, 1, N, N) float mask that transformers'
    eager and sdpa attention accept as a custom 4D ``attention_mask`` (0 = attend, min = blocked).
    Introduced in lesson 08."""
    bias = torch.zeros(mask.shape, dtype=dtype)
    bias.masked_fill_(~mask, torch.finfo(dtype).min)
    return bias[None, None]


def packed_loss(model: torch.nn.Module, packed: PackedTree, *,
                position_ids: torch.Tensor | None = None,
                loss_weight: torch.Tensor | None = None) -> torch.Tensor:
    """The weighted next-token loss of a packed tree in one forward pass.

    Node c's token is predicted from the logits at ``parent(c)`` and weighted by
    ``packed.loss_weight[c]``; the sum is divided by the number of trained tokens over all
    trajectories, so the result equals :func:`unpacked_loss`. ``position_ids``/``loss_weight``
    override the packed ones (the lesson uses this to show what goes wrong). Introduced in lesson 08.
    """
    pos = packed.position_ids if position_ids is None else position_ids
    w = packed.loss_weight if loss_weight is None else loss_weight
    dtype = next(model.parameters()).dtype
    bias = attention_bias(packed.tree_mask(), dtype=dtype)
    out = model(input_ids=packed.input_ids[None], position_ids=pos[None], attention_mask=bias)
    logits = out.logits[0]
    has_parent = packed.parent >= 0
    targets = packed.input_ids[has_parent]
    pred_logits = logits[packed.parent[has_parent]]
    token_loss = F.cross_entropy(pred_logits.float(), targets, reduction="none")
    return (token_loss * w[has_parent]).sum() / max(packed.num_loss_tokens, 1)


def unpacked_loss(model: torch.nn.Module, sequences: Sequence[Sequence[int]],
                  loss_masks: Sequence[Sequence[int]] | None = None, *, pad_id: int = 0) -> torch.Tensor:
    """The ordinary loss: every trajectory as its own (right-padded) row of a batch; the sum of
    token losses times their mask (0/1, or float per-token weights) divided by the number of
    non-zero mask entries. Introduced in lesson 08."""
    if loss_masks is None:
        loss_masks = [[1] * len(s) for s in sequences]
    length = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(sequences), length), dtype=torch.long)
    lmask = torch.zeros((len(sequences), length), dtype=torch.float32)
    for b, (s, m) in enumerate(zip(sequences, loss_masks)):
        ids[b, : len(s)] = torch.tensor(list(s))
        attn[b, : len(s)] = 1
        lmask[b, : len(s)] = torch.tensor([float(x) for x in m])
    lmask[:, 0] = 0.0
    out = model(input_ids=ids, attention_mask=attn)
    logits = out.logits[:, :-1].float()
    token_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                 reduction="none").view(len(sequences), length - 1)
    mask = lmask[:, 1:]
    return (token_loss * mask).sum() / (mask != 0).sum().clamp(min=1)


def make_branching_tree(num_branches: int, length: int, shared_ratio: float, *, vocab_size: int,
                        seed: int = 0, levels: int = 1) -> list[list[int]]:
    """Synthetic trajectories of ``length`` tokens each whose first ``shared_ratio`` share of tokens
    is common to all (``levels=2`` splits the branches again halfway through their own parts).
    Used by the lesson and the packing benchmark. Introduced in lesson 08."""
    g = torch.Generator().manual_seed(seed)
    shared = max(1, int(round(shared_ratio * length)))
    prefix = torch.randint(1, vocab_size, (shared,), generator=g).tolist()
    rest = length - shared
    seqs = []
    if levels == 1 or num_branches < 4:
        for _ in range(num_branches):
            seqs.append(prefix + torch.randint(1, vocab_size, (rest,), generator=g).tolist())
        return seqs
    half = rest // 2
    groups = 2
    for gi in range(groups):
        mid = torch.randint(1, vocab_size, (half,), generator=g).tolist()
        for _ in range(num_branches // groups + (gi < num_branches % groups)):
            seqs.append(prefix + mid + torch.randint(1, vocab_size, (rest - half,), generator=g).tolist())
    return seqs


def sharing_stats(sequences: Sequence[Sequence[int]]) -> dict[str, float]:
    """Tokens computed unpacked vs packed and the ideal speedup (their ratio). Introduced in lesson 08."""
    packed = pack_tree(sequences)
    unpacked = sum(len(s) for s in sequences)
    return {"unpacked_tokens": unpacked, "packed_tokens": packed.num_nodes,
            "shared_fraction": 1 - packed.num_nodes / unpacked,
            "token_speedup": unpacked / packed.num_nodes}


# --- beyond a loss linear in the weight: PPO clipping on a packed tree ------------------------------

def packed_token_logprobs(model: torch.nn.Module, packed: PackedTree) -> torch.Tensor:
    """One forward pass over the packed tree: ``out[c]`` is the log-probability of node c's token given
    its ancestors (0 for roots, which nothing predicts). Every trajectory through c sees the same
    context, so this one number is its log-prob in each of them. Introduced in lesson 08."""
    dtype = next(model.parameters()).dtype
    bias = attention_bias(packed.tree_mask(), dtype=dtype)
    logits = model(input_ids=packed.input_ids[None], position_ids=packed.position_ids[None],
                   attention_mask=bias).logits[0].float()
    has_parent = packed.parent >= 0
    logp = torch.zeros(packed.num_nodes, dtype=logits.dtype)
    pred = torch.log_softmax(logits[packed.parent[has_parent]], -1)
    return logp.masked_scatter(has_parent, pred.gather(-1, packed.input_ids[has_parent, None])[:, 0])


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                      clip_eps: float = 0.2) -> torch.Tensor:
    """The PPO/GRPO clipped objective as a loss (to minimise), averaged over masked tokens:
    ``-min(ratio * A, clip(ratio, 1-eps, 1+eps) * A)``. Introduced in lesson 08."""
    unclipped = ratio * advantages
    clipped = ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    mask = mask.float()
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


def packed_clipped_loss(logp_new: torch.Tensor, logp_old: torch.Tensor, packed: PackedTree,
                        advantages: Sequence[Sequence[float]], clip_eps: float = 0.2) -> torch.Tensor:
    """The PPO clipped loss of every trajectory from one packed forward pass: the shared tokens'
    log-probs (``logp_new``/``logp_old`` per node, from :func:`packed_token_logprobs`) are gathered
    back onto each trajectory, and ``-min(rho A, clip(rho) A)`` is taken per trajectory and token with
    that trajectory's own advantage. Equals the unpacked clipped loss (mean over the non-zero
    advantages). Summing the advantages onto a shared node first (what :func:`pack_tree` does with
    float weights) is exact only for a loss linear in the weight: clipping is not. Introduced in lesson 08."""
    if len(advantages) != len(packed.branch_nodes):
        raise ValueError(f"{len(packed.branch_nodes)} trajectories but {len(advantages)} advantage lists")
    ratios, advs, masks = [], [], []
    for b, (nodes, adv) in enumerate(zip(packed.branch_nodes, advantages)):
        if len(adv) != len(nodes):
            raise ValueError(f"trajectory {b}: {len(nodes)} tokens but {len(adv)} advantages")
        idx = torch.tensor(nodes[1:], dtype=torch.long)
        a = torch.tensor([float(x) for x in adv[1:]])
        ratios.append(torch.exp(logp_new[idx] - logp_old[idx].detach()))
        advs.append(a)
        masks.append((a != 0).float())
    return clipped_surrogate(torch.cat(ratios), torch.cat(advs), torch.cat(masks), clip_eps)


# --- trie packing under a memory limit (KAT-Coder V1: dynamic programming + greedy) ------------------

def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def packing_cost(sequences: Sequence[Sequence[int]], packs: Sequence[Sequence[int]]) -> int:
    """Tokens computed when each pack (a list of sequence indices) is one packed trie: the sum of the
    packs' trie sizes. Introduced in lesson 08."""
    return sum(pack_tree([sequences[i] for i in p]).num_nodes for p in packs)


def pack_under_budget(sequences: Sequence[Sequence[int]], budget: int) -> list[list[int]]:
    """Split trajectories into packs of at most ``budget`` trie nodes each (the memory limit of one
    packed forward pass), computing as few tokens as possible. Greedy part: sort the trajectories in
    token order, so the ones that share prefixes are neighbours and the trie size of a run of
    neighbours is ``sum(len) - sum(lcp of consecutive ones)``. Dynamic-programming part: the optimal
    cut of that sorted list into contiguous packs within the budget (``best[j] = min_i best[i] +
    cost(i, j)``). Returns the packs as lists of indices into ``sequences``. A trajectory longer than
    the budget is an error naming it. Introduced in lesson 08."""
    if budget < 1:
        raise ValueError("budget must be a positive number of tokens")
    for i, s in enumerate(sequences):
        if len(s) > budget:
            raise ValueError(f"sequence {i} has {len(s)} tokens, more than the budget of {budget}: "
                             "split it or raise the budget")
    order = sorted(range(len(sequences)), key=lambda i: list(sequences[i]))
    seqs = [list(sequences[i]) for i in order]
    n = len(seqs)
    lengths = [0] + [len(s) for s in seqs]
    lcps = [0, 0] + [_lcp(seqs[k - 1], seqs[k]) for k in range(1, n)]   # lcps[k+1]: seqs[k-1] vs seqs[k]
    cum_len, cum_lcp = [0] * (n + 1), [0] * (n + 1)
    for k in range(1, n + 1):
        cum_len[k] = cum_len[k - 1] + lengths[k]
        cum_lcp[k] = cum_lcp[k - 1] + lcps[k]

    def cost(i: int, j: int) -> int:          # trie nodes of seqs[i:j] (sorted, contiguous)
        return cum_len[j] - cum_len[i] - (cum_lcp[j] - cum_lcp[i + 1])

    inf = float("inf")
    best, cut = [0.0] + [inf] * n, [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j - 1, -1, -1):
            c = cost(i, j)
            if c > budget:
                break                         # longer runs only grow
            if best[i] + c < best[j]:
                best[j], cut[j] = best[i] + c, i
    packs, j = [], n
    while j > 0:
        packs.append([order[k] for k in range(cut[j], j)])
        j = cut[j]
    return packs[::-1]


def first_fit_packs(sequences: Sequence[Sequence[int]], budget: int) -> list[list[int]]:
    """The naive packer the DP is compared with: trajectories in arrival order, each added to the
    current pack while its trie stays within ``budget``, else a new pack. Introduced in lesson 08."""
    packs: list[list[int]] = []
    for i in range(len(sequences)):
        if len(sequences[i]) > budget:
            raise ValueError(f"sequence {i} has {len(sequences[i])} tokens, more than the budget of {budget}")
        if packs and packing_cost(sequences, [packs[-1] + [i]]) <= budget:
            packs[-1].append(i)
        else:
            packs.append([i])
    return packs
