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
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.agentic.harness import sample_continuations  # lesson 08's sampler


def reverse_kl_per_token(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """``sum_v p_s(v) (log p_s(v) - log p_t(v))`` at each position: (..., V) → (...); tokens with
    ``p_s(v) = 0`` add 0. Introduced in lesson 09."""
    ls = F.log_softmax(student_logits.float(), -1)
    lt = F.log_softmax(teacher_logits.float(), -1)
    ps = ls.exp()
    # a token the student never picks (p_s = 0, e.g. a -inf logit) adds 0, not 0 * inf = nan
    return torch.where(ps > 0, ps * (ls - lt), torch.zeros_like(ps)).sum(-1)


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


@torch.no_grad()
def sequence_cross_entropy(model: torch.nn.Module, sequences: torch.Tensor, prompt_len: int) -> float:
    """Mean cross-entropy of ``model`` on the tokens after the prompt of fixed ``sequences`` (e.g. a
    held-out set of the teacher's samples): the cold start's yardstick, which does not move with
    sampling the way the per-step training loss does. Introduced in lesson 09."""
    logits = model(input_ids=sequences).logits[:, prompt_len - 1:-1].float()
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), sequences[:, prompt_len:].reshape(-1)))


class UnreliableTeacher(torch.nn.Module):
    """A teacher whose guidance is garbage from position ``from_position`` on: the logits there are a
    fixed random table (per position), not the wrapped model's. A stand-in for the notes' "the student's
    long trajectory drifts into states the teacher does not know": the teacher's distribution on such a
    prefix looks confident but is unrelated to the task. Introduced in lesson 09."""

    def __init__(self, model: torch.nn.Module, from_position: int, *, scale: float = 4.0, seed: int = 0):
        super().__init__()
        self.model, self.from_position, self.scale, self.seed = model, int(from_position), scale, seed

    def forward(self, input_ids: torch.Tensor, **kw):
        out = self.model(input_ids=input_ids, **kw)
        logits = out.logits.clone()
        T, V = logits.shape[-2:]
        if T > self.from_position:
            g = torch.Generator().manual_seed(self.seed)
            garbage = torch.randn(T, V, generator=g) * self.scale
            logits[..., self.from_position:, :] = garbage[self.from_position:].to(logits.dtype)
        return SimpleNamespace(logits=logits)


def sampled_token_opd_loss(logp_student: torch.Tensor, logp_teacher: torch.Tensor,
                           mask: torch.Tensor) -> torch.Tensor:
    """KAT-Coder-V2's OPD term from the teacher's log-prob of the student's *sampled* tokens only (no
    full-vocabulary logits): per token ``sg(log p_s(x) - log p_t(x)) * log p_s(x)``, averaged over the
    mask. Its value is not the KL, but its gradient, in expectation over ``x ~ p_s``, is the gradient of
    the full-vocabulary reverse KL ``KL(p_s || p_t)`` at that position (score-function estimator; the
    ``log p_s - log p_t`` factor must be detached). Introduced in lesson 09."""
    mask = mask.float()
    gap = logp_student.detach() - logp_teacher.detach()
    return (gap * logp_student * mask).sum() / mask.sum().clamp(min=1)


def joint_rl_opd_loss(logp_new: torch.Tensor, logp_old: torch.Tensor, logp_teacher: torch.Tensor,
                      advantages: torch.Tensor, mask: torch.Tensor, *, opd_coef: float = 1.0,
                      clip_eps: float = 0.2) -> torch.Tensor:
    """KAT-Coder-V2's joint objective on the student's own rollouts: the clipped RL loss (environment
    reward → advantages) plus ``opd_coef`` × the sampled-token OPD term (teacher log-probs).
    Introduced in lesson 09."""
    from course_lib.agentic.grpo import clipped_surrogate

    rl = clipped_surrogate(torch.exp(logp_new - logp_old.detach()), advantages, mask, clip_eps)
    return rl + opd_coef * sampled_token_opd_loss(logp_new, logp_teacher, mask)


def rl_opd_bandit(teacher_probs, correct, *, opd_coef: float = 1.0, use_rl: bool = True, steps: int = 60,
                  group: int = 16, lr: float = 0.5, seed: int = 0) -> dict[str, list[float]]:
    """The joint objective on a one-step task: the student picks one of ``len(teacher_probs)`` answers,
    reward 1 when ``correct[answer]``; each step samples a group, GRPO advantages from the rewards
    (``use_rl``), the teacher's log-prob of each sampled answer for the OPD term (``opd_coef``; 0 turns
    it off). Returns per step the student's success probability and its reverse KL to the teacher.
    Introduced in lesson 09."""
    from course_lib.agentic.grpo import group_advantages

    t = torch.as_tensor(teacher_probs, dtype=torch.float64)
    ok = torch.as_tensor(correct, dtype=torch.float64)
    if t.shape != ok.shape or t.ndim != 1 or abs(float(t.sum()) - 1) > 1e-6:
        raise ValueError("teacher_probs must be one probability vector with one `correct` flag per answer")
    logits = torch.zeros_like(t, requires_grad=True)
    opt = torch.optim.SGD([logits], lr=lr)
    g = torch.Generator().manual_seed(seed)
    success, kl = [], []
    for _ in range(steps):
        logp = torch.log_softmax(logits, 0)
        p = logp.detach().exp()
        success.append(float((p * ok).sum()))
        kl.append(float((p * (logp.detach() - t.log())).sum()))
        x = torch.multinomial(p, group, replacement=True, generator=g)
        reward = ok[x]
        adv = torch.as_tensor(group_advantages(reward.numpy()) if use_rl else np.zeros(group))
        lp = logp[x][None]
        loss = joint_rl_opd_loss(lp, lp.detach(), t.log()[x][None], adv[None], torch.ones(1, group),
                                 opd_coef=opd_coef)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"success": success, "kl": kl}


def average_parameters(models: list[torch.nn.Module]) -> torch.nn.Module:
    """A copy of ``models[0]`` whose every parameter is the mean of the models' (the fusion KAT-Coder-V2
    avoids). Introduced in lesson 09."""
    if not models:
        raise ValueError("average_parameters needs at least one model")
    avg = copy.deepcopy(models[0])
    states = [m.state_dict() for m in models]
    avg.load_state_dict({k: sum(s[k].float() for s in states) / len(states) for k in states[0]})
    return avg


class DomainPolicy(torch.nn.Module):
    """A toy policy over ``vocab`` answers for ``domains`` task domains: ``logits(d) = shared + own[d]``.
    The shared part is what every domain's training moves (the base model's common weights).
    Introduced in lesson 09."""

    def __init__(self, domains: int, vocab: int):
        super().__init__()
        self.shared = torch.nn.Parameter(torch.zeros(vocab))
        self.own = torch.nn.Parameter(torch.zeros(domains, vocab))

    def forward(self, domain_ids: torch.Tensor) -> torch.Tensor:
        return self.shared + self.own[domain_ids]


def _fit(model: torch.nn.Module, domain_ids: torch.Tensor, targets: torch.Tensor, steps: int, lr: float,
         reverse: bool) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        logp = torch.log_softmax(model(domain_ids), -1)
        if reverse:      # on-policy distillation: reverse KL to the teacher's distribution, exactly
            loss = (logp.exp() * (logp - targets.log())).sum(-1).mean()
        else:            # the expert's own training on its domain: cross-entropy to the domain's answers
            loss = -(targets * logp).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def fusion_experiment(domain_targets: torch.Tensor, *, steps: int = 300, lr: float = 0.1) -> dict:
    """Experts vs their fusion on :class:`DomainPolicy`. ``domain_targets[d]`` is the answer distribution
    of domain d. Expert d is trained (cross-entropy) on domain d only, from the same zero base. Then:
    each expert's score on each domain (mean log-likelihood of the domain's answers: a measured routing
    table), the teachers :func:`route_teachers` picks, the parameter average of the experts, and a
    student fused through output distributions (reverse KL to the routed expert on each domain). Returns
    those and per domain the reverse KL of the average and of the fused student to the routed expert.
    Introduced in lesson 09."""
    targets = torch.as_tensor(domain_targets, dtype=torch.float32)
    n, vocab = targets.shape
    domains = torch.arange(n)
    names = [f"expert_{d}" for d in range(n)]
    experts = []
    for d in range(n):
        m = DomainPolicy(n, vocab)
        _fit(m, domains[d:d + 1], targets[d:d + 1], steps, lr, reverse=False)
        experts.append(m)
    with torch.no_grad():
        scores = {names[e]: {f"domain_{d}": float((targets[d] * torch.log_softmax(experts[e](domains[d]), -1)).sum())
                             for d in range(n)} for e in range(n)}
    routes = route_teachers([f"domain_{d}" for d in range(n)], scores)
    routed = [experts[names.index(r)] for r in routes]
    with torch.no_grad():
        teacher_probs = torch.stack([torch.softmax(routed[d](domains[d]), -1) for d in range(n)])
    averaged = average_parameters(experts)
    fused = DomainPolicy(n, vocab)
    _fit(fused, domains, teacher_probs, steps, lr, reverse=True)

    def kl_to_teacher(model):
        with torch.no_grad():
            logp = torch.log_softmax(model(domains), -1)
            return (logp.exp() * (logp - teacher_probs.log())).sum(-1).tolist()

    return {"scores": scores, "routes": routes, "experts": experts, "averaged": averaged, "fused": fused,
            "kl_averaged": kl_to_teacher(averaged), "kl_fused": kl_to_teacher(fused),
            "kl_experts_off_domain": [kl_to_teacher(e) for e in experts]}


def truncation_by_length(seed: int = 0, n: int = 64, low_overlap_rate: float = 0.15, threshold: float = 0.25,
                         run: int = 4, batch_size: int = 8, num_strata: int = 4) -> dict:
    """Lesson 09's toy: ``n`` trajectories of log-normal lengths (64–8,192 tokens), each token low-overlap
    (0.1) with probability ``low_overlap_rate``, else 0.8; the gate (:func:`gate_weights`)
    cuts each after ``run`` low tokens in a row. Returns the lengths, the tokens that survive per trajectory,
    the longest quarter's indices, the share of tokens surviving in the longest quarter and in the rest, and
    random vs length-stratified batches. Introduced in lesson 09."""
    from course_lib.agentic.grpo import length_stratified_batches

    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(7, 1, n).astype(int), 64, 8192)
    overlap = np.where(rng.random((n, lengths.max())) < low_overlap_rate, 0.1, 0.8)
    weights = gate_weights(torch.tensor(overlap), threshold=threshold, run=run).numpy()
    trained = np.array([(weights[i, :lengths[i]] > 0).sum() for i in range(n)])
    longest = np.argsort(lengths)[-n // 4:]
    rest = np.delete(np.arange(n), longest)
    return {"lengths": lengths, "trained": trained, "longest": longest,
            "survive_longest": float(trained[longest].sum() / lengths[longest].sum()),
            "survive_rest": float(trained[rest].sum() / lengths[rest].sum()),
            "random_batches": np.random.default_rng(seed).permutation(n).reshape(-1, batch_size).tolist(),
            "stratified_batches": length_stratified_batches(lengths, batch_size, num_strata, seed=seed)}
