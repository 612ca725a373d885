"""On-policy distillation: reverse KL, top-k overlap, gating, and the KL falling on a tiny model."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.agentic.distill import (
    cold_start,
    distill_loss,
    gate_weights,
    mean_reverse_kl,
    on_policy_distill,
    reverse_kl_per_token,
    route_teachers,
    sample_continuations,
    topk_overlap,
    weaken,
)
from tests._agentic_helpers import tiny_qwen2


def test_reverse_kl_is_zero_for_equal_and_is_the_reverse_direction():
    a = torch.tensor([[2.0, 0.0, -1.0]])
    assert reverse_kl_per_token(a, a).abs().item() < 1e-6
    p_s = torch.tensor([0.9, 0.05, 0.05])
    p_t = torch.tensor([0.4, 0.3, 0.3])
    kl = reverse_kl_per_token(p_s.log()[None], p_t.log()[None]).item()
    assert abs(kl - float((p_s * (p_s / p_t).log()).sum())) < 1e-6
    assert abs(kl - float((p_t * (p_t / p_s).log()).sum())) > 1e-3     # not the forward KL


def test_topk_overlap():
    s = torch.tensor([[5.0, 4, 3, 2, 1, 0]])
    assert topk_overlap(s, s, k=3).item() == 1.0
    assert topk_overlap(s, -s, k=3).item() == 0.0
    assert abs(topk_overlap(s, torch.tensor([[5.0, 0, 3, 2, 1, 4]]), k=3).item() - 2 / 3) < 1e-6


def test_gate_cuts_after_a_run_of_low_overlap():
    ov = torch.tensor([[1.0, 0.1, 0.1, 0.9, 0.1, 0.1, 0.1, 1.0, 1.0]])
    w = gate_weights(ov, threshold=0.25, run=3)
    assert w[0, :6].tolist() == ov[0, :6].tolist()      # a short run of 2 is only down-weighted
    assert w[0, 6:].tolist() == [0.0, 0.0, 0.0]          # cut from the third low token on, for good


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kl_falls_when_the_student_distills_from_the_teacher(seed):
    """Measured on fixed held-out sequences (not on the freshly sampled ones), for several seeds."""
    teacher = tiny_qwen2("sdpa", vocab_size=64, initializer_range=0.3, seed=1)
    student = weaken(teacher, noise=0.5, seed=seed)
    prompts = torch.randint(0, 64, (8, 4), generator=torch.Generator().manual_seed(seed))
    held_out = torch.randint(0, 64, (16, 16), generator=torch.Generator().manual_seed(99))
    before = mean_reverse_kl(student, teacher, held_out, 4)
    on_policy_distill(student, teacher, prompts, steps=12, max_new_tokens=12, lr=1e-2, k=8, seed=seed)
    after = mean_reverse_kl(student, teacher, held_out, 4)
    assert after < 0.85 * before, (before, after)
    assert not student.training and not teacher.training       # both left in eval mode
    seqs = sample_continuations(student, prompts, 3, seed=0)
    assert seqs.shape == (8, 7) and torch.equal(seqs[:, :4], prompts)


def test_cold_start_fits_the_expert_trajectories():
    teacher = tiny_qwen2("sdpa", vocab_size=64, initializer_range=0.3, seed=1)
    student = weaken(teacher, noise=0.5, seed=0)
    prompts = torch.randint(0, 64, (8, 4), generator=torch.Generator().manual_seed(0))
    losses = cold_start(student, teacher, prompts, steps=10, max_new_tokens=8, lr=1e-2)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3


def test_multi_teacher_routing_picks_the_best_expert_per_domain():
    scores = {"swe": {"swe": 0.7, "terminal": 0.4}, "terminal": {"swe": 0.3, "terminal": 0.6},
              "web": {"webcoding": 0.8}}
    assert route_teachers(["swe", "terminal", "webcoding", "swe"], scores) == ["swe", "terminal", "web", "swe"]
    with pytest.raises(ValueError, match="search"):
        route_teachers(["search"], scores)


# --- stub models whose logits we choose: the defining properties of on-policy distillation ---------

class Bigram(torch.nn.Module):
    """logits at position t = table[token t]: a model whose prediction depends on the prefix."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(torch.as_tensor(table, dtype=torch.float32).clone())

    def forward(self, input_ids, **kw):
        from types import SimpleNamespace
        return SimpleNamespace(logits=self.table[input_ids])


def _tables(v=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(v, v, generator=g), torch.randn(v, v, generator=g)


def test_distill_loss_is_the_gated_reverse_kl_not_the_forward_one():
    s_tab, t_tab = _tables()
    student, teacher = Bigram(s_tab), Bigram(t_tab)
    seqs = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 0, 1, 2], [3, 3, 1, 0, 7, 2, 5, 5, 6, 1]])
    loss, stats = distill_loss(student, teacher, seqs, 3, k=3, threshold=0.4, run=2)
    s, t = s_tab[seqs][:, 2:-1], t_tab[seqs][:, 2:-1]
    ls, lt = s.log_softmax(-1), t.log_softmax(-1)
    rkl, fkl = (ls.exp() * (ls - lt)).sum(-1), (lt.exp() * (lt - ls)).sum(-1)
    w = gate_weights(topk_overlap(s, t, 3), 0.4, 2)
    assert (w == 0).any() and (w > 0).any()                     # the gate cuts some tokens here
    assert loss.item() == pytest.approx(float((w * rkl).sum() / w.sum()), rel=1e-5)
    assert loss.item() != pytest.approx(float((w * fkl).sum() / w.sum()), rel=1e-3)
    ungated, _ = distill_loss(student, teacher, seqs, 3, k=3, threshold=0.4, run=2, gated=False)
    assert ungated.item() == pytest.approx(float(rkl.mean()), rel=1e-5)
    assert loss.item() != pytest.approx(ungated.item(), rel=1e-3)  # the gate changes the loss


def test_the_gate_cuts_the_gradient_after_a_low_overlap_run():
    """Same top-3 everywhere (overlap 1, yet a KL to learn) except after token 2, where the teacher's
    top-3 is disjoint from the student's. The sample 0 1 2 2 4 4 4 4 shows two low-overlap positions in
    a row: from there on nothing trains the student, so row 4 (used only afterwards) gets no gradient."""
    v = 6
    s_tab = torch.tensor([5.0, 4, 3, 0, 0, 0]).repeat(v, 1)
    t_tab = torch.tensor([4.0, 5, 3, 0, 0, 0]).repeat(v, 1)
    t_tab[2] = torch.tensor([0.0, 0, 0, 5, 4, 3])
    seqs = torch.tensor([[0, 1, 2, 2, 4, 4, 4, 4]])
    grads = {}
    for gated in (True, False):
        student = Bigram(s_tab)
        loss, _ = distill_loss(student, Bigram(t_tab), seqs, 1, k=3, threshold=0.25, run=2, gated=gated)
        loss.backward()
        grads[gated] = student.table.grad.abs().sum(1)
    assert grads[True][4] == 0 and grads[True][0] > 0 and grads[True][1] > 0
    assert grads[False][4] > 0                                   # without the gate row 4 learns


def test_on_policy_distill_trains_on_the_students_own_samples():
    """Student: after any token, almost surely token 3. Teacher: almost surely token 5. On-policy, the
    student's samples are 3, 3, 3 ...: only the rows of the prompt's last token and of token 3 learn;
    trained on the teacher's samples (5, 5, ...) row 5 would."""
    v = 8
    s_tab, t_tab = torch.zeros(v, v), torch.zeros(v, v)
    s_tab[:, 3] = 12.0
    t_tab[:, 5] = 12.0
    student, teacher = Bigram(s_tab), Bigram(t_tab)
    before = student.table.detach().clone()
    prompts = torch.tensor([[0, 1], [1, 0]])
    on_policy_distill(student, teacher, prompts, steps=1, max_new_tokens=4, lr=0.1, gated=False)
    moved = (student.table.detach() - before).abs().sum(1)
    assert moved[3] > 0 and moved[[0, 1]].sum() > 0
    assert moved[5] == 0 and moved[[2, 4, 6, 7]].sum() == 0


def test_sampled_token_opd_has_the_full_reverse_kl_gradient_in_expectation():
    """V2's OPD from the teacher's log-prob of the sampled token only: averaged over the student's own
    distribution (enumerated exactly), its gradient is the full-vocabulary reverse-KL gradient."""
    from course_lib.agentic.distill import sampled_token_opd_loss

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, generator=g).requires_grad_(True)
    lt = torch.randn(6, generator=g).log_softmax(0)
    ls = logits.log_softmax(0)
    (full,) = torch.autograd.grad((ls.exp() * (ls - lt)).sum(), logits)
    expected = torch.zeros(6)
    for x in range(6):
        lsx = logits.log_softmax(0)
        (gx,) = torch.autograd.grad(sampled_token_opd_loss(lsx[x][None, None], lt[x][None, None], torch.ones(1, 1)),
                                    logits)
        expected += lsx.exp()[x].detach() * gx
    assert torch.allclose(expected, full, atol=1e-6)
    # without the detach (log p_s - log p_t differentiated as a plain loss) the expected gradient is wrong
    naive = torch.zeros(6)
    for x in range(6):
        lsx = logits.log_softmax(0)
        (gx,) = torch.autograd.grad(lsx[x] - lt[x], logits)
        naive += lsx.exp()[x].detach() * gx
    assert not torch.allclose(naive, full, atol=1e-3)


def test_joint_rl_opd_keeps_success_and_follows_the_teacher_among_correct_answers():
    from course_lib.agentic.distill import rl_opd_bandit

    teacher = [0.05, 0.6] + [0.35 / 6] * 6                       # right answers 0 and 1; the teacher prefers 1
    correct = [1, 1, 0, 0, 0, 0, 0, 0]
    runs = {name: [rl_opd_bandit(teacher, correct, seed=s, **kw) for s in range(3)]
            for name, kw in [("rl", {"opd_coef": 0.0}), ("opd", {"use_rl": False}), ("joint", {})]}
    final = {n: (np.mean([r["success"][-1] for r in rs]), np.mean([r["kl"][-1] for r in rs])) for n, rs in runs.items()}
    assert final["opd"][0] < 0.7 < final["joint"][0]             # OPD alone inherits the teacher's errors
    assert final["joint"][1] < final["rl"][1]                    # RL alone ignores which right answer
    with pytest.raises(ValueError):
        rl_opd_bandit([0.5, 0.6], [1, 0])


def test_fusion_through_output_distributions_beats_parameter_averaging():
    from course_lib.agentic.distill import fusion_experiment

    targets = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.25, 0.25, 0.4, 0.1]])
    res = fusion_experiment(targets)
    assert res["routes"] == ["expert_0", "expert_1", "expert_2"]             # measured scores route each domain
    assert max(res["kl_fused"]) < 1e-3 < min(res["kl_averaged"])
    assert res["scores"]["expert_0"]["domain_0"] > res["scores"]["expert_1"]["domain_0"]


def test_unreliable_teacher_changes_only_the_late_positions():
    from course_lib.agentic.distill import UnreliableTeacher

    base = tiny_qwen2("sdpa", vocab_size=64, initializer_range=0.3, seed=1)
    bad = UnreliableTeacher(base, from_position=6, seed=0)
    ids = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = base(input_ids=ids).logits, bad(input_ids=ids).logits
    assert torch.allclose(a[:, :6], b[:, :6]) and not torch.allclose(a[:, 6:], b[:, 6:])
    assert torch.equal(bad(input_ids=ids).logits, b)                           # deterministic
