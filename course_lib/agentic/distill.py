"""On-policy distillation with top-k gating (KAT-Coder-V2.5 MOPD, one teacher at a time).

The student samples a continuation; the teacher scores the student's *own* prefix at every
position; the loss is the per-token reverse KL ``KL(student || teacher)`` (mode-seeking: the
student is pushed off tokens the teacher finds unlikely). Two safeguards from the report:

* each token's loss is weighted by the overlap of the teacher's and the student's top-k tokens
  (when they disagree entirely, the teacher's signal there is unreliable for this student);
* after ``run`` consecutive tokens with overlap below ``threshold`` the student has drifted where the
  teacher cannot guide it: the gradient is cut for the rest of the sequence.

Introduced in lesson 09.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F


def reverse_kl_per_token(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """``sum_v p_s(v) (log p_s(v) - log p_t(v))`` at each position: (..., V) → (...).
    Introduced in lesson 09."""
    ls = F.log_softmax(student_logits.float(), -1)
    lt = F.log_softmax(teacher_logits.float(), -1)
    return (ls.exp() * (ls - lt)).sum(-1)


def topk_overlap(student_logits: torch.Tensor, teacher_logits: torch.Tensor, k: int = 8) -> torch.Tensor:
    """|top-k(student) ∩ top-k(teacher)| / k at each position: (..., V) → (...) in [0, 1].
    Introduced in lesson 09."""
    s = student_logits.topk(k, -1).indices
    t = teacher_logits.topk(k, -1).indices
    return (s[..., :, None] == t[..., None, :]).any(-1).float().mean(-1)


def gate_weights(overlap: torch.Tensor, threshold: float = 0.25, run: int = 4) -> torch.Tensor:
    """Per-token weights: the overlap itself, and 0 from the end of the first run of ``run``
    consecutive tokens with overlap < ``threshold`` onwards (per row of a (B, T) tensor).
    Introduced in lesson 09."""
    weights = overlap.clone().float()
    low = overlap < threshold
    for b in range(overlap.shape[0]):
        streak = 0
        for t in range(overlap.shape[1]):
            streak = streak + 1 if low[b, t] else 0
            if streak >= run:
                weights[b, t:] = 0.0
                break
    return weights


@torch.no_grad()
def sample_continuations(model: torch.nn.Module, prompt_ids: torch.Tensor, max_new_tokens: int,
                         temperature: float = 1.0, seed: int | None = None) -> torch.Tensor:
    """Plain ancestral sampling (no cache, small models): (B, P) → (B, P + max_new_tokens).
    Introduced in lesson 09."""
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = model(input_ids=ids).logits[:, -1].float() / temperature
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
        ids = torch.cat([ids, nxt], 1)
    return ids


def distill_loss(student: torch.nn.Module, teacher: torch.nn.Module, sequences: torch.Tensor,
                 prompt_len: int, *, k: int = 8, threshold: float = 0.25, run: int = 4,
                 gated: bool = True) -> tuple[torch.Tensor, dict[str, float]]:
    """The gated per-token reverse-KL loss on the student's own samples (positions that predict the
    generated tokens) and its statistics. Introduced in lesson 09."""
    s_logits = student(input_ids=sequences).logits[:, prompt_len - 1:-1]
    with torch.no_grad():
        t_logits = teacher(input_ids=sequences).logits[:, prompt_len - 1:-1]
    kl = reverse_kl_per_token(s_logits, t_logits)
    overlap = topk_overlap(s_logits.detach(), t_logits, k)
    w = gate_weights(overlap, threshold, run) if gated else torch.ones_like(kl)
    loss = (w * kl).sum() / w.sum().clamp(min=1e-8)
    return loss, {"kl": float(kl.detach().mean()), "overlap": float(overlap.mean()),
                  "gated_share": float((w == 0).float().mean())}


def weaken(model: torch.nn.Module, noise: float = 0.5, seed: int = 0) -> torch.nn.Module:
    """A weaker copy: every weight matrix gets Gaussian noise of ``noise`` × its own std.
    Introduced in lesson 09."""
    student = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in student.parameters():
            if p.ndim >= 2:
                p.add_(torch.randn(p.shape, generator=g) * p.std() * noise)
    return student


def on_policy_distill(student: torch.nn.Module, teacher: torch.nn.Module, prompts: torch.Tensor, *,
                      steps: int = 10, max_new_tokens: int = 16, lr: float = 1e-3, k: int = 8,
                      threshold: float = 0.25, run: int = 4, seed: int = 0) -> list[dict[str, float]]:
    """MOPD loop: sample with the student, score with the teacher, step on the gated reverse KL.
    Returns the statistics of every step (KL measured before the step). Introduced in lesson 09."""
    opt = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=0.0)
    teacher.eval()
    history = []
    for step in range(steps):
        student.eval()
        seqs = sample_continuations(student, prompts, max_new_tokens, seed=seed + step)
        student.train()
        loss, stats = distill_loss(student, teacher, seqs, prompts.shape[1], k=k, threshold=threshold, run=run)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append({"step": step, "loss": float(loss.detach()), **stats})
    student.eval()
    return history
