"""Mutation check for lessons 08–09's RL mechanics: apply each plausible bug to a copy of
``course_lib/agentic`` and run the tests that must catch it; every mutant must make them fail.

    PYTHONPATH=$PWD .venv/bin/python -m tests._agentic_mutations            # all mutants
    PYTHONPATH=$PWD .venv/bin/python -m tests._agentic_mutations clip_lower  # one mutant by name

Each mutant is (name, file under course_lib/agentic, the exact text replaced, its replacement, the test
files or node ids that must fail). A replacement that no longer matches the source is reported as
stale (the mutant must be updated with the code). Prints one line per mutant; exits 1 if any survived.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MUTANTS = [
    ("clip_lower_side_removed", "tree.py", "ratio.clamp(1 - clip_eps, 1 + clip_eps)", "ratio.clamp(max=1 + clip_eps)",
     ["tests/test_agentic_grpo.py", "tests/test_agentic_turns.py"]),
    ("clip_max_not_min", "tree.py", "per_token = -torch.minimum(unclipped, clipped)",
     "per_token = -torch.maximum(unclipped, clipped)", ["tests/test_agentic_grpo.py"]),
    ("ppo_step_lower_side_removed", "critic.py", "np.clip(rho, 1 - clip_eps, 1 + clip_eps) * adv",
     "np.minimum(rho, 1 + clip_eps) * adv", ["tests/test_agentic_critic.py"]),
    ("distill_forward_kl", "distill.py", "kl = reverse_kl_per_token(s_logits, t_logits)",
     "kl = reverse_kl_per_token(t_logits, s_logits)", ["tests/test_agentic_distill.py"]),
    ("distill_gate_ignored", "distill.py",
     "w = gate_weights(overlap, threshold, run) if gated else torch.ones_like(kl)", "w = torch.ones_like(kl)",
     ["tests/test_agentic_distill.py"]),
    ("distill_off_policy", "distill.py", "seqs = sample_continuations(student, prompts, max_new_tokens, seed=seed + step)\n"
     "        loss, stats = distill_loss(", "seqs = sample_continuations(teacher, prompts, max_new_tokens, seed=seed + step)\n"
     "        loss, stats = distill_loss(", ["tests/test_agentic_distill.py"]),
    ("gate_not_for_good", "distill.py", "weights[b, t:] = 0.0\n                break", "weights[b, t] = 0.0",
     ["tests/test_agentic_distill.py"]),
    ("opd_gap_not_detached", "distill.py", "gap = logp_student.detach() - logp_teacher.detach()",
     "gap = logp_student - logp_teacher.detach()", ["tests/test_agentic_distill.py"]),
    ("critic_monte_carlo_targets", "critic.py", "        critic.fit(ep, returns)\n        success.append",
     "        critic.fit(ep, np.cumsum(ep.rewards[:, ::-1], 1)[:, ::-1])\n        success.append",
     ["tests/test_agentic_critic.py"]),
    ("critic_never_fitted", "critic.py", "        critic.fit(ep, returns)\n        success.append",
     "        success.append", ["tests/test_agentic_critic.py"]),
    ("critic_fits_advantages", "critic.py", "        critic.fit(ep, returns)\n        success.append",
     "        critic.fit(ep, adv)\n        success.append", ["tests/test_agentic_critic.py"]),
    ("gae_without_lambda", "critic.py", "running = delta + gamma * lam * running", "running = delta + gamma * running",
     ["tests/test_agentic_critic.py"]),
    ("no_advantage_normalisation", "critic.py",
     "actor_adv = (adv - adv.mean()) / (adv.std() + 1e-8) if normalize else adv", "actor_adv = adv",
     ["tests/test_agentic_critic.py"]),
    ("success_loses_to_failure", "rule_rewards.py", "max_penalty: float = 0.5", "max_penalty: float = 0.65",
     ["tests/test_agentic_rule_rewards.py"]),
    ("turn_ratio_arithmetic_mean", "turns.py",
     "    mean_diff = _segment_mean(logp_new - logp_old, turn_ids, mask)\n"
     "    return torch.where(mask.bool(), torch.exp(mean_diff), torch.ones_like(mean_diff))",
     "    mean_ratio = _segment_mean(torch.exp(logp_new - logp_old), turn_ids, mask)\n"
     "    return torch.where(mask.bool(), mean_ratio, torch.ones_like(mean_ratio))", ["tests/test_agentic_turns.py"]),
    ("turn_loss_per_trajectory", "turns.py", "ratio = turn_ratios(logp_new, logp_old.detach(), turn_ids, mask)",
     "ratio = sequence_ratios(logp_new, logp_old.detach(), mask)", ["tests/test_agentic_turns.py"]),
    ("difficulty_from_shaped_rewards", "grpo.py",
     "successes = groups_rewards if groups_successes is None else groups_successes", "successes = groups_rewards",
     ["tests/test_agentic_grpo.py"]),
    ("tst_never_splits", "emsft.py", "if list(req[\"context\"][:len(seen)]) == seen:", "if True:",
     ["tests/test_agentic_emsft.py"]),
    ("packing_in_arrival_order", "tree.py", "order = sorted(range(len(sequences)), key=lambda i: list(sequences[i]))",
     "order = list(range(len(sequences)))", ["tests/test_agentic_tree.py"]),
    ("conftest_not_a_test_file", "trajectories.py", '"conftest.py", ', "", ["tests/test_agentic_trajectories.py"]),
    ("hint_leak_kept", "trajectories.py",
     'if hint.lower() in cand.trajectory.lower() or "hint" in cand.trajectory.lower():', "if False:",
     ["tests/test_agentic_trajectories.py"]),
    ("rft_reward_from_reference", "trajectories.py", "float(bool(verify(steps)))",
     "float(reference_deviation(steps, references) == 0)", ["tests/test_agentic_trajectories.py"]),
    ("fusion_by_parameter_averaging", "distill.py",
     "    fused = DomainPolicy(n, vocab)\n    _fit(fused, domains, teacher_probs, steps, lr, reverse=True)",
     "    fused = average_parameters(experts)", ["tests/test_agentic_distill.py"]),
    ("tst_trains_carried_messages_twice", "emsft.py",
     "ex.loss_mask = [m if ex.message_index[j] in produced else 0 for j, m in enumerate(ex.loss_mask)]",
     "ex.loss_mask = list(ex.loss_mask)", ["tests/test_agentic_emsft.py"]),
    ("partial_credit_despite_broken_p2p", "rule_rewards.py",
     "partial = f2p_passed / len(fail_to_pass) if p2p_ok else 0.0", "partial = f2p_passed / len(fail_to_pass)",
     ["tests/test_agentic_rule_rewards.py"]),
    ("packed_weight_not_summed", "tree.py", "                weight[child] += float(m)", "                weight[child] = float(m)",
     ["tests/test_agentic_tree.py"]),
]


def run_mutant(name: str, file: str, old: str, new: str, tests: list[str],
               python: str = sys.executable) -> tuple[str, str]:
    """('killed' | 'SURVIVED' | 'stale', the first failing test) for one mutant, run against a temporary
    copy of course_lib and tests."""
    source = (ROOT / "course_lib" / "agentic" / file).read_text(encoding="utf-8")
    if source.count(old) != 1:
        return "stale", ""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{name}-") as tmp:
        for part in ("course_lib", "tests"):          # a self-contained copy: nothing imports the original
            shutil.copytree(ROOT / part, Path(tmp) / part, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "pyproject.toml", tmp)
        (Path(tmp) / "course_lib" / "agentic" / file).write_text(source.replace(old, new), encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=tmp, OMP_NUM_THREADS="1")
        proc = subprocess.run([python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header",
                               "-o", "addopts=", *tests], cwd=tmp, env=env, capture_output=True, text=True)
        imported = subprocess.run([python, "-c", "import course_lib.agentic, sys; print(course_lib.agentic.__file__)"],
                                  cwd=tmp, env=env, capture_output=True, text=True).stdout.strip()
        if not imported.startswith(tmp):
            raise RuntimeError(f"the mutant's copy was not imported ({imported}); check PYTHONPATH")
    failed = next((ln.split(" - ")[0].removeprefix("FAILED ") for ln in proc.stdout.splitlines()
                   if ln.startswith("FAILED ")), "")
    return ("killed" if proc.returncode != 0 else "SURVIVED"), failed


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTANTS if not argv or m[0] in argv]
    survived = 0
    for name, file, old, new, tests in chosen:
        t0 = time.perf_counter()
        verdict, failed = run_mutant(name, file, old, new, tests)
        survived += verdict != "killed"
        print(f"{name:<32} {file:<16} {verdict:<9} {time.perf_counter() - t0:>4.0f} s  {failed or ' '.join(tests)}",
              flush=True)
    print(f"{len(chosen) - survived}/{len(chosen)} mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
