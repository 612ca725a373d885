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
                      threshold: float = 0.25, run: int = 4, gated: bool = True,
                      seed: int = 0) -> list[dict[str, float]]:
    """MOPD loop: sample with the student, score with the teacher, step on the (gated, unless
    ``gated=False``) reverse KL; both models stay in eval mode. Returns the statistics of every step
    (KL measured before the step). Introduced in lesson 09."""
    opt = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=0.0)
    teacher.eval()
    student.eval()        # no dropout: the loss and the KL it reports are deterministic given the samples
    history = []
    for step in range(steps):
        seqs = sample_continuations(student, prompts, max_new_tokens, seed=seed + step)
        loss, stats = distill_loss(student, teacher, seqs, prompts.shape[1], k=k, threshold=threshold, run=run,
                                   gated=gated)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append({"step": step, "loss": float(loss.detach()), **stats})
    return history


def cold_start(student: torch.nn.Module, teacher: torch.nn.Module, prompts: torch.Tensor, *,
               steps: int = 10, max_new_tokens: int = 16, lr: float = 1e-3, seed: int = 0) -> list[float]:
    """MOPD's cold start (KAT-Coder-V2.5): before the on-policy stage, supervised fine-tuning of the
    student on the expert's own trajectories (the teacher samples, the student learns them with
    cross-entropy), so the student starts with the basic behaviour. Returns the loss of every step.
    Introduced in lesson 09."""
    opt = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=0.0)
    teacher.eval()
    student.eval()
    losses = []
    for step in range(steps):
        seqs = sample_continuations(teacher, prompts, max_new_tokens, seed=seed + step)
        logits = student(input_ids=seqs).logits[:, prompts.shape[1] - 1:-1].float()
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seqs[:, prompts.shape[1]:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def route_teachers(task_domains: list[str], expert_scores: dict[str, dict[str, float]]) -> list[str]:
    """Multi-teacher routing (KAT-Coder-V2): for each task, the expert that scores best on the task's
    domain supervises the student there (``expert_scores[expert][domain]``). A domain no expert was
    scored on is an error naming it. Introduced in lesson 09."""
    chosen = []
    for i, domain in enumerate(task_domains):
        scored = {name: s[domain] for name, s in expert_scores.items() if domain in s}
        if not scored:
            raise ValueError(f"task {i}: no expert has a score for domain {domain!r}; "
                             f"scored domains: {sorted({d for s in expert_scores.values() for d in s})}")
        chosen.append(max(scored, key=scored.get))
    return chosen


@torch.no_grad()
def mean_reverse_kl(student: torch.nn.Module, teacher: torch.nn.Module, sequences: torch.Tensor,
                    prompt_len: int) -> float:
    """Mean per-token reverse KL of the student against the teacher on fixed ``sequences`` (the
    positions that predict tokens after the prompt): a yardstick that does not move with sampling.
    Introduced in lesson 09."""
    s = student(input_ids=sequences).logits[:, prompt_len - 1:-1]
    t = teacher(input_ids=sequences).logits[:, prompt_len - 1:-1]
    return float(reverse_kl_per_token(s, t).mean())
