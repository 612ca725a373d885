"""Turn-level importance ratios and MCLA (KAT-Coder-V2).

*Turn-level ratio.* PPO/GRPO compare the new and the old policy with an importance ratio. One ratio
per token is noisy; one per trajectory (the geometric mean over all its tokens) lets a single
drifting turn decide the clipping of a 50-turn episode. The turn-level ratio is the geometric mean
over the tokens of one assistant turn: every token of the turn uses it, and clipping acts per turn.

*MCLA.* In large MoE models the log-probabilities that the trainer recomputes are noisy (routing
and kernel non-determinism), so ratios are noisy even when the policy has not changed. Averaging the
log-probabilities of K prefills of the same tokens (K = 8 in the report) divides the variance of that
noise by about K. We simulate the noise with dropout left on.

Introduced in lesson 09.
"""
from __future__ import annotations

from typing import Callable

import torch

from course_lib.agentic.grpo import clipped_surrogate


def _segment_mean(values: torch.Tensor, segment_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the masked tokens of each segment, broadcast back to the tokens."""
    mask = mask.float()
    out = torch.zeros_like(values)
    for b in range(values.shape[0]):
        for seg in torch.unique(segment_ids[b][mask[b] > 0]).tolist():
            sel = (segment_ids[b] == seg) & (mask[b] > 0)
            out[b, sel] = values[b, sel].mean()
    return out


def token_ratios(logp_new: torch.Tensor, logp_old: torch.Tensor) -> torch.Tensor:
    """Per-token ratio ``exp(logp_new - logp_old)``. Introduced in lesson 09."""
    return torch.exp(logp_new - logp_old)


def turn_ratios(logp_new: torch.Tensor, logp_old: torch.Tensor, turn_ids: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
    """Per-token tensor holding the ratio of the token's turn: ``exp(mean_turn(logp_new - logp_old))``
    (the geometric mean of the token ratios of that turn). Tokens outside ``mask`` get 1.
    Introduced in lesson 09."""
    mean_diff = _segment_mean(logp_new - logp_old, turn_ids, mask)
    return torch.where(mask.bool(), torch.exp(mean_diff), torch.ones_like(mean_diff))


def sequence_ratios(logp_new: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token tensor holding one ratio per trajectory (geometric mean over all its tokens).
    Introduced in lesson 09."""
    return turn_ratios(logp_new, logp_old, torch.zeros_like(logp_new, dtype=torch.long), mask)


def turn_level_loss(logp_new: torch.Tensor, logp_old: torch.Tensor, advantages: torch.Tensor,
                    turn_ids: torch.Tensor, mask: torch.Tensor, clip_eps: float = 0.2) -> torch.Tensor:
    """Clipped policy loss with turn-level ratios (advantages per token, usually one per trajectory
    broadcast). Gradients flow through ``logp_new``. Introduced in lesson 09."""
    ratio = turn_ratios(logp_new, logp_old.detach(), turn_ids, mask)
    return clipped_surrogate(ratio, advantages, mask, clip_eps)


def mcla_logprobs(score: Callable[[], torch.Tensor], k: int = 8) -> torch.Tensor:
    """MCLA: the mean of the log-probabilities returned by ``k`` calls of ``score`` (k noisy prefills
    of the same tokens). Introduced in lesson 09."""
    if k < 1:
        raise ValueError("k must be at least 1")
    return torch.stack([score() for _ in range(k)]).mean(0)


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Log-probability of each next token under ``model``: (B, T) ids → (B, T-1). Dropout acts if the
    model is in train mode (our stand-in for MoE routing noise). Introduced in lesson 09."""
    logits = model(input_ids=input_ids).logits[:, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, input_ids[:, 1:, None])[..., 0]


def ratio_noise_by_k(score: Callable[[], torch.Tensor], ks=(1, 2, 4, 8), trials: int = 20) -> dict[int, float]:
    """Std of the log-ratio between two independent MCLA estimates of the *same* policy (ideal: 0),
    for each K. It falls like 1/sqrt(K). Introduced in lesson 09."""
    out = {}
    with torch.no_grad():
        for k in ks:
            diffs = [mcla_logprobs(score, k) - mcla_logprobs(score, k) for _ in range(trials)]
            out[k] = float(torch.stack(diffs).std())
    return out


def icepop_mask(logp_train: torch.Tensor, logp_infer: torch.Tensor, mask: torch.Tensor, *,
                low: float = 0.5, high: float = 2.0) -> torch.Tensor:
    """IcePop: keep only the tokens whose train/inference probability ratio
    ``exp(logp_train - logp_infer)`` lies in ``[low, high]``; the others get mask 0 (no gradient).
    The trainer's and the sampler's numbers for the same token should agree; a token where they
    disagree by more than that range is a train/infer mismatch, not a learning signal.
    Introduced in lesson 09."""
    if not 0 < low <= 1 <= high:
        raise ValueError(f"need 0 < low <= 1 <= high, got low={low}, high={high}")
    ratio = torch.exp(logp_train.detach() - logp_infer.detach())
    return mask.float() * ((ratio >= low) & (ratio <= high)).float()


# --- routing alignment (KAT-Coder-V2: 对齐采样与训练路由) --------------------------------------------

def moe_routes(hidden: torch.Tensor, router: torch.Tensor, *, noise: float = 0.0,
               seed: int | None = None) -> torch.Tensor:
    """Top-1 expert of each token of a toy MoE layer: ``argmax(hidden @ router + noise)``. ``noise``
    stands for the engine's numerical differences (another kernel, another batch size): two engines
    with different noise can route a near-tie token to different experts. Introduced in lesson 09."""
    scores = hidden @ router
    if noise:
        g = torch.Generator().manual_seed(seed) if seed is not None else None
        scores = scores + noise * torch.randn(scores.shape, generator=g, dtype=scores.dtype)
    return scores.argmax(-1)


def moe_logprobs(hidden: torch.Tensor, experts: torch.Tensor, routes: torch.Tensor,
                 targets: torch.Tensor) -> torch.Tensor:
    """Log-probability of each target token when token i goes through expert ``routes[i]``
    (``experts``: (E, d, V) output heads). Introduced in lesson 09."""
    logits = torch.einsum("nd,ndv->nv", hidden, experts[routes])
    return torch.log_softmax(logits, -1).gather(-1, targets[:, None])[:, 0]
